package faults

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The rules CheckTokens enforces, as Violation.Rule names them.
const (
	// RuleRevoked: a Validate accepted a session after a revocation of it
	// had returned: on the Manager that revoked it, at any time; on
	// another Manager, once that Manager's CacheTTL had passed too.
	RuleRevoked = "revoked session validated"
	// RuleNeverIssued: a Validate accepted a session that no successful
	// Issue or Rotate in the history made.
	RuleNeverIssued = "unknown session validated"
	// RuleWrongUser: a Validate returned another user than the session was
	// issued to.
	RuleWrongUser = "session validated as another user"
	// RuleUnavailable: inside a ReadsMustWork span, a Validate of a live
	// session that nobody had tried to revoke failed with Unavailable.
	RuleUnavailable = "live session unavailable while reads must work"
)

// Violation is a breach of a rule that CheckTokens found, with the
// operations that show it.
type Violation struct {
	Rule string
	// Ops are the operations involved: the revocation (and the Issue it
	// covered) and the Validate, or for the other rules the Validate and
	// the session's Issue.
	Ops []Op
	// Why says how the operations break the rule, with times.
	Why string

	t0 time.Time
}

// String says which rule broke and how, then lists the operations
// involved, one a line, with times relative to the history's start.
func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.Rule, v.Why)
	for _, op := range v.Ops {
		b.WriteString("\n\t")
		b.WriteString(op.format(v.t0))
	}
	return b.String()
}

// revocation is a successful operation after whose return a session must
// no longer validate.
type revocation struct {
	op  Op
	end time.Time
}

// issued is how a session came to be.
type issued struct {
	op   Op
	user int64
	end  time.Time
}

// CheckTokens checks a token history against the revocation promise and
// returns every breach, in the order of the offending Validates:
//
//   - A successful revocation of session S returned at time R: a Revoke of
//     S's token, a RevokeSession of S, a Rotate of S, or a RevokeAll of
//     S's user that began after S's Issue returned and did not keep S.
//     Then no Validate of S that began after R may succeed if it ran on
//     the Manager that revoked; on another Manager m, none that began
//     after R + cacheTTL(m) (RuleRevoked). A revocation that failed or
//     is pending constrains nothing: it may or may not have happened.
//   - A Validate succeeds only for a session that a successful Issue or
//     Rotate made (RuleNeverIssued), and returns, if recorded, the user it
//     was issued to (RuleWrongUser).
//   - A Validate that served the token of session S as another session
//     S' (Op.Served: S was rotated out, and its token stands for its
//     successor for a grace window) is judged as a Validate of S' that
//     must also not follow a Revoke or RevokeSession of S (those of S's
//     token or ID end S' too; S's Rotate does not, nor a RevokeAll, which
//     ends S' itself if it covers it). S' may be a session no successful
//     Rotate made only if a Rotate that did not succeed began before the
//     Validate ended: a rotation whose answer was lost may have applied.
//   - Inside a ReadsMustWork span, a Validate of a session issued before
//     it began, which no revocation of any outcome had begun to touch
//     before it ended, must not fail with Unavailable (RuleUnavailable).
//
// cacheTTL gives each Manager's CacheTTL (nil: no Manager caches).
// The check is not a linearizability check: an operation concurrent with
// a revocation may see either state, and a cache may serve a revoked
// session for its TTL, which a linearizable register could not.
func CheckTokens(h *History, cacheTTL func(manager int) time.Duration) []Violation {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	windows := slices.Clone(h.windows)
	t0 := h.t0
	h.mu.Unlock()
	if cacheTTL == nil {
		cacheTTL = func(int) time.Duration { return 0 }
	}

	made := map[int64]issued{}
	byUser := map[int64][]int64{} // sessions of each user, in the order made
	for _, op := range ops {
		if op.Outcome != OK {
			continue
		}
		switch {
		case op.Kind == Issue && op.Session != 0:
			made[op.Session] = issued{op: op, user: op.User, end: op.End}
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
			made[op.NewSession] = issued{op: op, user: user, end: op.End}
			byUser[user] = append(byUser[user], op.NewSession)
		}
	}

	// revoked: successful revocations of each session. touched: the
	// earliest start of any revocation attempt that may cover a session.
	revoked := map[int64][]revocation{}
	touched := map[int64]time.Time{}
	touch := func(s int64, at time.Time) {
		if t, ok := touched[s]; !ok || at.Before(t) {
			touched[s] = at
		}
	}
	for _, op := range ops {
		switch op.Kind {
		case Revoke, RevokeSession, Rotate:
			touch(op.Session, op.Start)
			if op.Outcome == OK {
				revoked[op.Session] = append(revoked[op.Session], revocation{op: op, end: op.End})
			}
		case RevokeAll:
			for _, s := range byUser[op.User] {
				if slices.Contains(op.Keep, s) {
					continue
				}
				// A session made after the RevokeAll returned is not touched by it.
				if !op.End.IsZero() && made[s].op.Start.After(op.End) {
					continue
				}
				touch(s, op.Start)
				if op.Outcome == OK && made[s].end.Before(op.Start) {
					revoked[s] = append(revoked[s], revocation{op: op, end: op.End})
				}
			}
		}
	}

	inWindow := func(op Op) bool {
		for _, w := range windows {
			if !op.Start.Before(w.from) && (w.to.IsZero() || !op.End.After(w.to)) {
				return true
			}
		}
		return false
	}

	// lostRotations are the starts of the Rotates that did not succeed.
	var lostRotations []time.Time
	for _, op := range ops {
		if op.Kind == Rotate && op.Outcome != OK {
			lostRotations = append(lostRotations, op.Start)
		}
	}

	var vs []Violation
	add := func(rule, why string, involved ...Op) {
		vs = append(vs, Violation{Rule: rule, Why: why, Ops: involved, t0: t0})
	}
	for _, v := range ops {
		if v.Kind != Validate {
			continue
		}
		origin, known := made[v.Session]
		switch v.Outcome {
		case OK:
			if !known {
				add(RuleNeverIssued, fmt.Sprintf("session %d accepted, but no successful Issue or Rotate made it", v.Session), v)
				continue
			}
			if v.User != 0 && origin.user != 0 && v.User != origin.user {
				add(RuleWrongUser, fmt.Sprintf("session %d of user %d accepted as user %d", v.Session, origin.user, v.User),
					origin.op, v)
				continue
			}
			rs := revoked[v.Session]
			if v.Served != 0 {
				if _, ok := made[v.Served]; !ok && !slices.ContainsFunc(lostRotations, v.End.After) {
					add(RuleNeverIssued, fmt.Sprintf("session %d's token served as session %d, which no Rotate may have made",
						v.Session, v.Served), origin.op, v)
					continue
				}
				rs = slices.Clone(revoked[v.Served])
				for _, r := range revoked[v.Session] {
					if r.op.Kind == Revoke || r.op.Kind == RevokeSession {
						rs = append(rs, r)
					}
				}
			}
			if r, why, ok := breach(v, rs, cacheTTL(v.Manager), t0); ok {
				involved := []Op{r.op, v}
				if r.op.Kind == RevokeAll {
					involved = []Op{origin.op, r.op, v}
				}
				add(RuleRevoked, why, involved...)
			}
		case Unavailable:
			if !known || !origin.end.Before(v.Start) || !inWindow(v) {
				continue
			}
			if t, ok := touched[v.Session]; ok && t.Before(v.End) {
				continue
			}
			add(RuleUnavailable, fmt.Sprintf("session %d, live and never revoked, failed inside a span where reads must work",
				v.Session), origin.op, v)
		}
	}
	return vs
}

// breach returns the first revocation in rs that v, a successful
// Validate by a Manager whose cache lives ttl, must have seen.
func breach(v Op, rs []revocation, ttl time.Duration, t0 time.Time) (revocation, string, bool) {
	for _, r := range rs {
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
	return revocation{}, "", false
}
