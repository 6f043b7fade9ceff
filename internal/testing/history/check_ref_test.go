package history

import (
	"fmt"
	"slices"
	"time"
)

// checkTokensReference is CheckTokens as it read before its cost was
// bounded, kept as the reference that the randomized tests compare
// CheckTokens with: it reads as the rules do, one revocation against one
// session at a time, and takes steps quadratic in the history (each
// RevokeAll looks at every session of its user, each Validate at every
// revocation of its session). It counts its steps in w, as CheckTokens
// does, for the cost test.
func checkTokensReference(w *work, ops []Op, windows []window, t0 time.Time, cacheTTL func(manager int) time.Duration) []Violation {
	if cacheTTL == nil {
		cacheTTL = func(int) time.Duration { return 0 }
	}

	made := map[int64]refIssued{}
	byUser := map[int64][]int64{} // sessions of each user, in the order made
	for _, op := range ops {
		w.steps++
		if op.Outcome != OK {
			continue
		}
		switch {
		case op.Kind == Issue && op.Session != 0:
			made[op.Session] = refIssued{op: op, user: op.User, end: op.End}
			byUser[op.User] = append(byUser[op.User], op.Session)
		case op.Kind == Rotate && op.NewSession != 0:
			if _, again := made[op.NewSession]; again {
				// A Rotate of a token rotated within the grace window
				// returns the session the first rotation made.
				continue
			}
			user := op.User
			if old, ok := made[op.Session]; ok && user == 0 {
				user = old.user
			}
			made[op.NewSession] = refIssued{op: op, user: user, end: op.End}
			byUser[user] = append(byUser[user], op.NewSession)
		}
	}

	// revoked: successful revocations of each session. touched: the
	// earliest start of any revocation attempt that may cover a session.
	revoked := map[int64][]refRevocation{}
	touched := map[int64]time.Time{}
	touch := func(s int64, at time.Time) {
		if t, ok := touched[s]; !ok || at.Before(t) {
			touched[s] = at
		}
	}
	for _, op := range ops {
		w.steps++
		switch op.Kind {
		case Revoke, RevokeSession, Rotate:
			touch(op.Session, op.Start)
			if op.Outcome == OK {
				revoked[op.Session] = append(revoked[op.Session], refRevocation{op: op, end: op.End})
			}
		case RevokeAll:
			for _, s := range byUser[op.User] {
				w.steps += 1 + int64(len(op.Keep))
				if slices.Contains(op.Keep, s) {
					continue
				}
				// A session made after the RevokeAll returned is not touched by it.
				if !op.End.IsZero() && made[s].op.Start.After(op.End) {
					continue
				}
				touch(s, op.Start)
				if op.Outcome == OK && made[s].end.Before(op.Start) {
					revoked[s] = append(revoked[s], refRevocation{op: op, end: op.End})
				}
			}
		}
	}

	inWindow := func(op Op) bool {
		for _, win := range windows {
			w.steps++
			if !op.Start.Before(win.from) && (win.to.IsZero() || !op.End.After(win.to)) {
				return true
			}
		}
		return false
	}

	// lostRotations are the starts of the Rotates that did not succeed.
	var lostRotations []time.Time
	for _, op := range ops {
		w.steps++
		if op.Kind == Rotate && op.Outcome != OK {
			lostRotations = append(lostRotations, op.Start)
		}
	}

	var vs []Violation
	add := func(rule, why string, involved ...Op) {
		vs = append(vs, Violation{rule: rule, why: why, ops: involved, t0: t0})
	}
	for _, v := range ops {
		w.steps++
		if v.Kind != Validate {
			continue
		}
		origin, known := made[v.Session]
		switch v.Outcome {
		case OK:
			if !known {
				add(ruleNeverIssued, fmt.Sprintf("session %d accepted, but no successful Issue or Rotate made it", v.Session), v)
				continue
			}
			if v.User != 0 && origin.user != 0 && v.User != origin.user {
				add(ruleWrongUser, fmt.Sprintf("session %d of user %d accepted as user %d", v.Session, origin.user, v.User),
					origin.op, v)
				continue
			}
			rs := revoked[v.Session]
			if v.Served != 0 {
				if _, ok := made[v.Served]; !ok && !slices.ContainsFunc(lostRotations, func(t time.Time) bool {
					w.steps++
					return v.End.After(t)
				}) {
					add(ruleNeverIssued, fmt.Sprintf("session %d's token served as session %d, which no Rotate may have made",
						v.Session, v.Served), origin.op, v)
					continue
				}
				rs = slices.Clone(revoked[v.Served])
				for _, r := range revoked[v.Session] {
					w.steps++
					if r.op.Kind == Revoke || r.op.Kind == RevokeSession {
						rs = append(rs, r)
					}
				}
			}
			if r, why, ok := refBreach(w, v, rs, cacheTTL(v.Manager), t0); ok {
				involved := []Op{r.op, v}
				if r.op.Kind == RevokeAll {
					involved = []Op{origin.op, r.op, v}
				}
				add(ruleRevoked, why, involved...)
			}
		case Unavailable:
			if !known || !origin.end.Before(v.Start) || !inWindow(v) {
				continue
			}
			if t, ok := touched[v.Session]; ok && t.Before(v.End) {
				continue
			}
			add(ruleUnavailable, fmt.Sprintf("session %d, live and never revoked, failed inside a span where reads must work",
				v.Session), origin.op, v)
		}
	}
	return vs
}

// refRevocation is a successful operation after whose return a session
// must no longer validate.
type refRevocation struct {
	op  Op
	end time.Time
}

// refIssued is how a session came to be.
type refIssued struct {
	op   Op
	user int64
	end  time.Time
}

// refBreach returns the first revocation in rs that v, a successful
// Validate by a Manager whose cache lives ttl, must have seen.
func refBreach(w *work, v Op, rs []refRevocation, ttl time.Duration, t0 time.Time) (refRevocation, string, bool) {
	for _, r := range rs {
		w.steps++
		if r.op.Manager == v.Manager {
			if v.Start.After(r.end) {
				return r, fmt.Sprintf("session %d revoked by m%d at %v; m%d accepted it in a Validate begun %v later",
					v.Session, r.op.Manager, r.end.Sub(t0), v.Manager, v.Start.Sub(r.end)), true
			}
			continue
		}
		if v.Start.After(r.end.Add(ttl)) {
			return r, fmt.Sprintf("session %d revoked by m%d at %v; m%d (CacheTTL %v) accepted it in a Validate begun %v later",
				v.Session, r.op.Manager, r.end.Sub(t0), v.Manager, ttl, v.Start.Sub(r.end)), true
		}
	}
	return refRevocation{}, "", false
}
