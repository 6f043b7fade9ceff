package history

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The rules CheckTokens enforces, as Violation.rule names them.
const (
	// ruleRevoked: a Validate accepted a session after a revocation of it
	// had returned: on the Manager that revoked it, at any time; on
	// another Manager, once that Manager's CacheTTL had passed too.
	ruleRevoked = "revoked session validated"
	// ruleNeverIssued: a Validate accepted a session that no successful
	// Issue or Rotate in the history made.
	ruleNeverIssued = "unknown session validated"
	// ruleWrongUser: a Validate returned another user than the session was
	// issued to.
	ruleWrongUser = "session validated as another user"
	// ruleUnavailable: inside a ReadsMustWork span, a Validate of a live
	// session that nobody had tried to revoke failed with Unavailable.
	ruleUnavailable = "live session unavailable while reads must work"
)

// Violation is a breach of a rule that CheckTokens found, with the
// operations that show it.
type Violation struct {
	rule string
	// ops are the operations involved: the revocation (and the Issue it
	// covered) and the Validate, or for the other rules the Validate and
	// the session's Issue.
	ops []Op
	// why says how the operations break the rule, with times.
	why string

	t0 time.Time
}

// String says which rule broke and how, then lists the operations
// involved, one a line, with times relative to the history's start.
func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.rule, v.why)
	for _, op := range v.ops {
		b.WriteString("\n\t")
		b.WriteString(op.format(v.t0))
	}
	return b.String()
}

// issued is how a session came to be: the last successful Issue or Rotate
// that made it, and the user it made it for.
type issued struct {
	op   Op
	user int64
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
//     A breach names the first such revocation in the history (for a
//     Validate that served another session, the first of that session's,
//     else the first Revoke or RevokeSession of its own).
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
//
// It takes O(n log n) steps for a history of n operations, whatever their
// mix (a RevokeAll does not look at each of its user's sessions, nor a
// Validate at each revocation of its session), when each session is made
// once, as session IDs are never repeated; a session made k times costs
// each of its Validates up to k times more.
func CheckTokens(h *History, cacheTTL func(manager int) time.Duration) []Violation {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	windows := slices.Clone(h.windows)
	t0 := h.t0
	h.mu.Unlock()
	return checkTokens(&work{}, ops, windows, t0, cacheTTL)
}

// checkTokens is CheckTokens on a history's operations and spans,
// counting its steps in w. It finds what the rules of CheckTokens find
// when every operation that ended ended no earlier than it began, as in
// every history a History records.
func checkTokens(w *work, ops []Op, windows []window, t0 time.Time, cacheTTL func(manager int) time.Duration) []Violation {
	if cacheTTL == nil {
		cacheTTL = func(int) time.Duration { return 0 }
	}
	made, sessionsOf := madeSessions(w, ops)

	// lostSince: the earliest start of a Rotate that did not succeed,
	// whose new session a Validate may have served.
	var lostSince time.Time
	lost := false
	for _, op := range ops {
		w.steps++
		if op.Kind == Rotate && op.Outcome != OK && (!lost || op.Start.Before(lostSince)) {
			lostSince, lost = op.Start, true
		}
	}
	// servedUnknown reports whether v served a session that no Rotate
	// may have made.
	servedUnknown := func(v Op) bool {
		_, ok := made[v.Served]
		return !ok && !(lost && v.End.After(lostSince))
	}

	// What the judgement of each Validate needs: for a successful one, the
	// first revocation it must have seen (of the session it served, then
	// of its own token or ID); for an Unavailable one, the earliest start
	// of a revocation attempt that may cover its session.
	type seen struct {
		ttl    time.Duration
		first  int // the first revocation of its session it must have seen, or none
		second int // for one that served another session, the first Revoke or RevokeSession of its own
	}
	queries := map[int]*seen{}      // Validate index -> its query
	bySession := map[int64][]int{}  // session -> the Validates that need its revocations
	byToken := map[int64][]int{}    // session -> the Validates that served another, needing its Revokes and RevokeSessions
	unavailable := map[int64]bool{} // sessions with Unavailable Validates
	for i, v := range ops {
		w.steps++
		if v.Kind != Validate {
			continue
		}
		origin, known := made[v.Session]
		switch {
		case !known:
		case v.Outcome == OK && (v.User == 0 || origin.user == 0 || v.User == origin.user):
			if v.Served == 0 {
				bySession[v.Session] = append(bySession[v.Session], i)
			} else if !servedUnknown(v) {
				bySession[v.Served] = append(bySession[v.Served], i)
				byToken[v.Session] = append(byToken[v.Session], i)
			} else {
				continue
			}
			queries[i] = &seen{ttl: cacheTTL(v.Manager), first: none, second: none}
		case v.Outcome == Unavailable:
			unavailable[v.Session] = true
		}
	}

	// touched: the earliest start of any revocation attempt that may cover
	// a session. direct: the successful revocations of each session by
	// its own ID or token. revokeAlls: every RevokeAll of each user;
	// keptBy: the RevokeAlls that kept each session.
	touched := map[int64]time.Time{}
	touch := func(s int64, at time.Time) {
		if t, ok := touched[s]; !ok || at.Before(t) {
			touched[s] = at
		}
	}
	direct := map[int64][]int{}
	byID := map[int64][]int{} // the successful Revokes and RevokeSessions of each session
	revokeAlls := map[int64][]int{}
	keptBy := map[int64][]int{}
	for i, op := range ops {
		w.steps++
		switch op.Kind {
		case Revoke, RevokeSession, Rotate:
			touch(op.Session, op.Start)
			if op.Outcome == OK && len(bySession[op.Session]) > 0 {
				direct[op.Session] = append(direct[op.Session], i)
			}
			if op.Outcome == OK && op.Kind != Rotate && len(byToken[op.Session]) > 0 {
				byID[op.Session] = append(byID[op.Session], i)
			}
		case RevokeAll:
			revokeAlls[op.User] = append(revokeAlls[op.User], i)
			for _, s := range op.Keep {
				w.steps++
				keptBy[s] = append(keptBy[s], i)
			}
		}
	}
	answer := func(rs *revocations, s int64) {
		for _, v := range bySession[s] {
			w.steps++
			q := queries[v]
			q.first = min(q.first, rs.firstSeen(ops[v], q.ttl))
		}
	}
	for s, idx := range direct {
		rs := newRevocations(w, ops, idx)
		for _, i := range idx {
			rs.take(i, true)
		}
		answer(rs, s)
	}
	for s, idx := range byID {
		rs := newRevocations(w, ops, idx)
		for _, i := range idx {
			rs.take(i, true)
		}
		for _, v := range byToken[s] {
			w.steps++
			q := queries[v]
			q.second = min(q.second, rs.firstSeen(ops[v], q.ttl))
		}
	}
	for u, all := range revokeAlls {
		var ok []int
		for _, i := range all {
			w.steps++
			if ops[i].Outcome == OK {
				ok = append(ok, i)
			}
		}
		var judged, failed []int64 // sessions with queries; with Unavailable Validates
		for _, s := range sessionsOf[u] {
			w.steps++
			if len(bySession[s]) > 0 {
				judged = append(judged, s)
			}
			if unavailable[s] {
				failed = append(failed, s)
			}
		}
		sweepRevokeAlls(w, ops, u, ok, judged, made, keptBy, answer)
		touchRevokeAlls(w, ops, u, all, failed, made, keptBy, touch)
	}

	spans := newReadSpans(w, windows)
	var vs []Violation
	add := func(rule, why string, involved ...Op) {
		vs = append(vs, Violation{rule: rule, why: why, ops: involved, t0: t0})
	}
	for i, v := range ops {
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
			if v.Served != 0 && servedUnknown(v) {
				add(ruleNeverIssued, fmt.Sprintf("session %d's token served as session %d, which no Rotate may have made",
					v.Session, v.Served), origin.op, v)
				continue
			}
			q := queries[i]
			first := q.first
			if first == none {
				first = q.second
			}
			if first == none {
				continue
			}
			r := ops[first]
			involved := []Op{r, v}
			if r.Kind == RevokeAll {
				involved = []Op{origin.op, r, v}
			}
			add(ruleRevoked, revokedWhy(v, r, q.ttl, t0), involved...)
		case Unavailable:
			if !known || !origin.op.End.Before(v.Start) || !spans.hold(w, v) {
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

// madeSessions returns how each session came to be (the last successful
// Issue or Rotate that made it) and the sessions made for each user, each
// once, in the order first made. A Rotate's new session belongs to the
// user the Rotate returned, else to the old session's user as made so far;
// a Rotate that returned a session an earlier one made leaves it as made.
func madeSessions(w *work, ops []Op) (made map[int64]issued, sessionsOf map[int64][]int64) {
	made, sessionsOf = map[int64]issued{}, map[int64][]int64{}
	listed := map[[2]int64]bool{}
	add := func(user, s int64, op Op) {
		made[s] = issued{op: op, user: user}
		if !listed[[2]int64{user, s}] {
			listed[[2]int64{user, s}] = true
			sessionsOf[user] = append(sessionsOf[user], s)
		}
	}
	for _, op := range ops {
		w.steps++
		if op.Outcome != OK {
			continue
		}
		switch {
		case op.Kind == Issue && op.Session != 0:
			add(op.User, op.Session, op)
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
			add(user, op.NewSession, op)
		}
	}
	return made, sessionsOf
}

// sweepRevokeAlls gives answer, for each session in judged of user u,
// the successful RevokeAlls of u (ok) that cover it: those that began
// after the session was made and did not keep it. It takes the sessions
// from the one made last to the one made first, and takes each RevokeAll
// in once the session was made before it began, so that each is taken in
// once (and out and in again for each session it kept).
func sweepRevokeAlls(w *work, ops []Op, u int64, ok []int, judged []int64, made map[int64]issued,
	keptBy map[int64][]int, answer func(*revocations, int64)) {
	if len(ok) == 0 || len(judged) == 0 {
		return
	}
	rs := newRevocations(w, ops, ok)
	byStart := slices.Clone(ok) // latest first
	sortFunc(w, byStart, func(a, b int) int { return ops[b].Start.Compare(ops[a].Start) })
	sortFunc(w, judged, func(a, b int64) int { return made[b].op.End.Compare(made[a].op.End) })
	next := 0
	for _, s := range judged {
		w.steps++
		madeAt := made[s].op.End
		for ; next < len(byStart) && madeAt.Before(ops[byStart[next]].Start); next++ {
			rs.take(byStart[next], true)
		}
		var out []int
		for _, i := range keptBy[s] {
			w.steps++
			if ops[i].User == u && rs.in(i) {
				rs.take(i, false)
				out = append(out, i)
			}
		}
		answer(rs, s)
		for _, i := range out {
			rs.take(i, true)
		}
	}
}

// touchRevokeAlls touches each session in failed of user u with the
// earliest start of the RevokeAlls of u (all, of any outcome) that may
// cover it: those that did not keep it and had not returned before the
// operation that made it began. It takes the sessions from the one made
// last to the one made first, and each RevokeAll in once it returned
// after the session's making began (a pending one from the start).
func touchRevokeAlls(w *work, ops []Op, u int64, all []int, failed []int64, made map[int64]issued,
	keptBy map[int64][]int, touch func(int64, time.Time)) {
	if len(failed) == 0 {
		return
	}
	byStart := slices.Clone(all) // earliest first: a tree position each
	sortFunc(w, byStart, func(a, b int) int { return ops[a].Start.Compare(ops[b].Start) })
	at := make(map[int]int, len(byStart))
	for p, i := range byStart {
		w.steps++
		at[i] = p
	}
	tree := newFirstsTree(w, len(byStart))
	var byEnd []int // the ended ones, latest first
	for _, i := range all {
		w.steps++
		if ops[i].End.IsZero() {
			tree.set(at[i], at[i], 0)
		} else {
			byEnd = append(byEnd, i)
		}
	}
	sortFunc(w, byEnd, func(a, b int) int { return ops[b].End.Compare(ops[a].End) })
	sortFunc(w, failed, func(a, b int64) int { return made[b].op.Start.Compare(made[a].op.Start) })
	next := 0
	for _, s := range failed {
		w.steps++
		began := made[s].op.Start
		for ; next < len(byEnd) && !began.After(ops[byEnd[next]].End); next++ {
			tree.set(at[byEnd[next]], at[byEnd[next]], 0)
		}
		var out []int
		for _, i := range keptBy[s] {
			w.steps++
			if p, ok := at[i]; ok && ops[i].User == u && tree.node[tree.n+p].i != none {
				tree.set(p, none, 0)
				out = append(out, p)
			}
		}
		if p := tree.prefix(tree.n).i; p != none {
			touch(s, ops[byStart[p]].Start)
		}
		for _, p := range out {
			tree.set(p, p, 0)
		}
	}
}

// revocations is a set of successful revocations that may cover one
// session, sorted by when each returned, in all and per Manager, of which
// some are taken in: firstSeen looks among those.
type revocations struct {
	w    *work
	ops  []Op
	all  *byEnd
	mgrs map[int]*byEnd
}

// byEnd is a set of revocations sorted by when each returned, each taken
// in at its position in the tree or not.
type byEnd struct {
	idx  []int       // operation indexes, by End
	at   map[int]int // operation index -> position in idx
	tree *firstsTree
}

func newByEnd(w *work, ops []Op, idx []int) *byEnd {
	b := &byEnd{idx: slices.Clone(idx), at: make(map[int]int, len(idx)), tree: newFirstsTree(w, len(idx))}
	sortFunc(w, b.idx, func(x, y int) int { return ops[x].End.Compare(ops[y].End) })
	for p, i := range b.idx {
		w.steps++
		b.at[i] = p
	}
	return b
}

// newRevocations returns the set of revocations idx, none taken in.
func newRevocations(w *work, ops []Op, idx []int) *revocations {
	per := map[int][]int{}
	for _, i := range idx {
		w.steps++
		per[ops[i].Manager] = append(per[ops[i].Manager], i)
	}
	rs := &revocations{w: w, ops: ops, all: newByEnd(w, ops, idx), mgrs: make(map[int]*byEnd, len(per))}
	for m, is := range per {
		rs.mgrs[m] = newByEnd(w, ops, is)
	}
	return rs
}

// take takes revocation i in (on) or out.
func (rs *revocations) take(i int, on bool) {
	m := rs.ops[i].Manager
	j := none
	if on {
		j = i
	}
	rs.all.tree.set(rs.all.at[i], j, m)
	rs.mgrs[m].tree.set(rs.mgrs[m].at[i], j, m)
}

// in reports whether i is one of the set's revocations, taken in.
func (rs *revocations) in(i int) bool {
	p, ok := rs.all.at[i]
	return ok && rs.all.tree.node[rs.all.tree.n+p].i != none
}

// firstSeen returns the index of the first revocation taken in that v, a
// successful Validate by a Manager whose cache lives ttl, must have seen:
// one by v's Manager that returned before v began, or one by another
// Manager that returned ttl before that; none if there is none.
func (rs *revocations) firstSeen(v Op, ttl time.Duration) int {
	first := none
	if same := rs.mgrs[v.Manager]; same != nil {
		k := search(rs.w, len(same.idx), func(j int) bool { return !rs.ops[same.idx[j]].End.Before(v.Start) })
		first = same.tree.prefix(k).i
	}
	k := search(rs.w, len(rs.all.idx), func(j int) bool { return !rs.ops[rs.all.idx[j]].End.Add(ttl).Before(v.Start) })
	f := rs.all.tree.prefix(k)
	other := f.i
	if f.m == v.Manager {
		other = f.i2
	}
	return min(first, other)
}

// revokedWhy says how v, a successful Validate by a Manager whose cache
// lives ttl, breaks the rule that r, a revocation it must have seen,
// sets.
func revokedWhy(v, r Op, ttl time.Duration, t0 time.Time) string {
	if r.Manager == v.Manager {
		return fmt.Sprintf("session %d revoked by m%d at %v; m%d accepted it in a Validate begun %v later",
			v.Session, r.Manager, r.End.Sub(t0), v.Manager, v.Start.Sub(r.End))
	}
	return fmt.Sprintf("session %d revoked by m%d at %v; m%d (CacheTTL %v) accepted it in a Validate begun %v later",
		v.Session, r.Manager, r.End.Sub(t0), v.Manager, ttl, v.Start.Sub(r.End))
}

// readSpans are the spans in which reads must work, sorted by when each
// opened, with what the spans opened so far cover.
type readSpans struct {
	from []time.Time
	open []bool      // open[k]: one of spans 0..k is still open
	to   []time.Time // to[k]: the latest close of spans 0..k
}

func newReadSpans(w *work, windows []window) readSpans {
	ws := slices.Clone(windows)
	sortFunc(w, ws, func(a, b window) int { return a.from.Compare(b.from) })
	s := readSpans{from: make([]time.Time, len(ws)), open: make([]bool, len(ws)), to: make([]time.Time, len(ws))}
	var open bool
	var to time.Time
	for k, win := range ws {
		w.steps++
		if win.to.IsZero() {
			open = true
		} else if win.to.After(to) {
			to = win.to
		}
		s.from[k], s.open[k], s.to[k] = win.from, open, to
	}
	return s
}

// hold reports whether op ran inside one span.
func (s readSpans) hold(w *work, op Op) bool {
	k := search(w, len(s.from), func(j int) bool { return op.Start.Before(s.from[j]) })
	return k > 0 && (s.open[k-1] || !op.End.After(s.to[k-1]))
}
