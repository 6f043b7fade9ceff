package tokens

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/history"
)

// The chaos scenarios observe their faults in the history as it grows
// (cacheRaces, revokedByRevokeAll), every few hundred milliseconds while
// the traffic runs, so these observers take O(n log n) steps, not the
// square of the history. The references below are the observers as first
// written, one revocation against every session it covers, kept to show
// that the faster ones find the same.

// cacheRacesReference is cacheRaces as first written.
func cacheRacesReference(ops []history.Op, ttl func(manager int) time.Duration) int {
	made, byUser := sessionsOf(ops)
	type key struct {
		m int
		s int64
	}
	revs := map[key][]history.Op{}
	validates := map[key][]history.Op{}
	for _, op := range ops {
		if op.Outcome == history.OK && isRevocation(op) && ttl(op.Manager) > 0 {
			for _, s := range covered(op, made, byUser) {
				revs[key{op.Manager, s}] = append(revs[key{op.Manager, s}], op)
			}
		}
		if op.Kind == history.Validate && ttl(op.Manager) > 0 {
			validates[key{op.Manager, op.Session}] = append(validates[key{op.Manager, op.Session}], op)
		}
	}
	n := 0
	for _, v := range ops {
		if v.Kind != history.Validate || v.Outcome != history.OK || v.Served != 0 || ttl(v.Manager) == 0 {
			continue
		}
		k := key{v.Manager, v.Session}
		spanned := slices.ContainsFunc(revs[k], func(r history.Op) bool {
			return v.Start.Before(r.Start) && r.End.Before(v.End)
		})
		if spanned && slices.ContainsFunc(validates[k], func(w history.Op) bool {
			return w.Start.After(v.End) && w.Start.Before(v.Start.Add(ttl(v.Manager)))
		}) {
			n++
		}
	}
	return n
}

// revokedByRevokeAllReference is revokedByRevokeAll as first written.
func revokedByRevokeAllReference(ops []history.Op) []int64 {
	made, byUser := sessionsOf(ops)
	seen := map[int64]bool{}
	var out []int64
	for _, op := range ops {
		if op.Kind != history.RevokeAll || op.Outcome != history.OK {
			continue
		}
		for _, s := range covered(op, made, byUser) {
			if seen[s] {
				continue
			}
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// randomOps returns n operations of the chaos traffic's kinds, for users
// users, on the Managers of chaosTTLs, drawn from rng: each begins no
// earlier than the one before it and ends no earlier than it began, as a
// History records them; a tenth fail, now and then an Issue repeats a
// session ID, and within a rotation's grace window a Validate serves the
// successor and a Rotate returns it again.
func randomOps(rng *rand.Rand, n, users int) []history.Op {
	t0 := time.Now()
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	var sessions []int64
	owner := map[int64]int64{}
	successor := map[int64]int64{} // the session a Rotate of each made
	next := int64(100)
	clock := 0
	var ops []history.Op
	for i := range n {
		clock += rng.IntN(3) * 100
		dur := rng.IntN(200) * 100
		if rng.IntN(2) == 0 {
			dur = rng.IntN(30000)
		}
		op := history.Op{Index: i, Manager: rng.IntN(len(chaosTTLs)), Start: at(clock), End: at(clock + dur), Outcome: history.OK}
		if rng.IntN(10) == 0 {
			op.Outcome = history.Unavailable
		}
		known := func() int64 {
			if len(sessions) == 0 {
				return 5
			}
			if rng.IntN(2) == 0 {
				return sessions[len(sessions)-1-rng.IntN(min(len(sessions), 8))]
			}
			return sessions[rng.IntN(len(sessions))]
		}
		u := 1 + rng.Int64N(int64(users))
		switch k := rng.IntN(10); {
		case k < 2 || len(sessions) == 0:
			op.Kind, op.User = history.Issue, u
			next++
			if rng.IntN(30) == 0 && len(sessions) > 0 {
				next--
				op.Session = sessions[rng.IntN(len(sessions))]
			} else {
				op.Session = next
			}
			sessions = append(sessions, op.Session)
			owner[op.Session] = u
		case k < 6:
			op.Kind, op.Session = history.Validate, known()
			if next, ok := successor[op.Session]; ok && rng.IntN(4) == 0 {
				op.Served = next
			}
		case k == 6:
			op.Kind, op.Session = history.Revoke, known()
		case k == 7:
			op.Kind, op.User = history.RevokeAll, u
			for range rng.IntN(3) {
				op.Keep = append(op.Keep, known())
			}
		case k == 8:
			op.Kind, op.Session = history.RevokeSession, known()
		default:
			op.Kind, op.Session = history.Rotate, known()
			if s, ok := successor[op.Session]; ok && rng.IntN(3) == 0 {
				op.NewSession = s // a Rotate within the grace window
				break
			}
			next++
			op.NewSession = next
			sessions = append(sessions, next)
			successor[op.Session] = next
		}
		ops = append(ops, op)
	}
	return ops
}

// TestObserversAgainstReference: on random histories, cacheRaces
// counts the races its reference counts, and revokedByRevokeAll lists the
// sessions its reference lists, in the same order.
func TestObserversAgainstReference(t *testing.T) {
	rng := chaos.Rand(chaos.Seed(t))
	races, revoked := 0, 0
	for range 2000 {
		ops := randomOps(rng, 1+rng.IntN(400), 1+rng.IntN(5))
		ttl := func(m int) time.Duration { return chaosTTLs[m] }
		want, got := cacheRacesReference(ops, ttl), cacheRaces(ops, ttl)
		if got != want {
			t.Fatalf("cacheRaces found %d races in %d operations, the reference %d", got, len(ops), want)
		}
		wantS, gotS := revokedByRevokeAllReference(ops), revokedByRevokeAll(ops)
		if !slices.Equal(gotS, wantS) {
			t.Fatalf("revokedByRevokeAll listed %v, the reference %v", gotS, wantS)
		}
		races += want
		revoked += len(wantS)
	}
	t.Logf("%d races, %d sessions revoked by RevokeAll, found alike", races, revoked)
	if races == 0 || revoked == 0 {
		t.Fatal("the random histories hold no race or no session revoked by RevokeAll: the comparison proves nothing")
	}
}
