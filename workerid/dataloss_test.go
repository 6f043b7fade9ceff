package workerid

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

var twoBits = idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}

// waitExpired waits until every lease has stopped its generator: cut off
// from its store, each runs out by its own clock.
func waitExpired(t *testing.T, leases []*Lease) {
	t.Helper()
	waitFor(t, 30*time.Second, "the cut-off leases to expire", func() bool {
		for _, l := range leases {
			if s := l.Status(); s.State == Held {
				return false
			}
		}
		return true
	})
}

// lastIssued returns the time of the last ID in ids, by layout l.
func lastIssued(l idtype.Layout, ids []idtype.ID) time.Time {
	if len(ids) == 0 {
		return time.Time{}
	}
	return l.Decode(slices.Max(ids)).Time
}

// firstIssued returns the time of the earliest of ids, or the zero time.
func firstIssued(l idtype.Layout, ids []idtype.ID) time.Time {
	if len(ids) == 0 {
		return time.Time{}
	}
	return l.Decode(slices.Min(ids)).Time
}

// TestRedisDataLoss restarts Redis without persistence while four leases
// are held and issuing, then lets four new leases take the four numbers
// at once, while the old owners, cut off from Redis, still believe they
// hold them and issue until their leases run out by their own clocks.
// Redis has lost the namespace's record with the leases, so the new
// owners wait out the loss window, one TTL, before their first ID, by
// when the old owners have stopped: no ID repeats. The control run, whose
// new owners do not wait, must find a new owner issuing before its old
// owner's last ID, or a repeated ID.
func TestRedisDataLoss(t *testing.T) {
	t.Parallel() // slow, and mostly waiting: overlap with the rest
	// run runs the scenario and returns how many duplicates it found.
	run := func(t *testing.T, defended bool) int {
		ctx := testenv.Deadline(t, 2*time.Minute)
		srv := private.StartRedis(t) // no persistence
		px := startProxy(t, srv.Addr())
		// A TTL long enough that the old owners still issue when the new
		// ones take the numbers, however long the restart takes.
		o := Options{Layout: twoBits, TTL: 3 * time.Second, Margin: 300 * time.Millisecond, RenewEvery: 500 * time.Millisecond}
		olds := redisPool(t, px.Addr(), "loss:", o)
		news := redisPoolWithout(t, srv.Addr(), "loss:", o, defences{noLossWait: !defended})
		trustRecord(t, olds)
		c := newCollector()
		oldLeases := acquireN(t, olds, 4)
		var oldNames, newNames []string
		for i, l := range oldLeases {
			oldNames = append(oldNames, fmt.Sprintf("old %d", i))
			c.run(oldNames[i], generator(t, l))
		}
		c.waitIssuedUntil(ctx, t, 100, oldNames...)

		px.Cut()
		srv.Kill()
		lost := time.Now()
		srv.Restart()
		newLeases := acquireN(t, news, 4)
		// The window ends one TTL after the server's start, which is
		// after it lost the data.
		waited := time.Since(lost)
		for i, l := range newLeases {
			newNames = append(newNames, fmt.Sprintf("new %d", i))
			c.run(newNames[i], generator(t, l))
		}
		// The old owners issue until their leases run out by their clocks;
		// the new ones, while they do, if they do not wait.
		waitExpired(t, oldLeases)
		c.waitIssuedUntil(ctx, t, 100, newNames...)
		px.Restore()
		for _, l := range oldLeases {
			select {
			case <-l.Done():
			case <-time.After(testenv.Stretched(10 * time.Second)):
				t.Fatalf("old owner of worker %d did not learn it lost it", l.Worker())
			}
		}
		lists := c.finish()
		// The fault: Redis forgot leases whose owners went on issuing.
		for _, name := range oldNames {
			if last := lastIssued(twoBits, lists[name]); !last.After(lost) {
				notMet(t, "%s issued nothing after Redis lost its lease (last ID at %s)", name, last)
			}
		}
		dups, total := duplicates(lists)
		// As in TestRedisFailoverToLaggingReplica: the numbers whose new
		// owner issued before its old owner's last ID, where IDs may
		// repeat however seldom a busy machine lets each side issue.
		oldOf := map[int64]string{}
		for i, l := range oldLeases {
			oldOf[l.Worker()] = oldNames[i]
		}
		var overlaps []int64
		for i, l := range newLeases {
			if first := firstIssued(twoBits, lists[newNames[i]]); !first.IsZero() && !first.After(lastIssued(twoBits, lists[oldOf[l.Worker()]])) {
				overlaps = append(overlaps, l.Worker())
			}
		}
		t.Logf("new owners ready %v after Redis lost its data; %d IDs, %d duplicates; numbers whose new owner issued before the old one's last ID: %v",
			waited.Round(time.Millisecond), total, dups, overlaps)
		switch {
		case defended && (dups > 0 || len(overlaps) > 0):
			t.Fatalf("%d duplicate IDs among %d; new owners of %v issued before their old owners' last ID", dups, total, overlaps)
		case defended && waited < news.opts.TTL:
			t.Fatalf("new owners issued %v after Redis lost its data, before one TTL (%v)", waited, news.opts.TTL)
		}
		return dups + len(overlaps)
	}
	t.Run("waits out a TTL", func(t *testing.T) {
		t.Parallel()
		tryReach(t, func(t *testing.T) bool {
			run(t, true)
			return true
		})
	})
	t.Run("control: no wait", func(t *testing.T) {
		t.Parallel()
		tryControl(t, func(t *testing.T) bool { return run(t, false) > 0 })
	})
}

// TestRedisFailoverToLaggingReplica fails over to a replica that stopped
// following its master while the old owners went on renewing, and that
// the old owners cannot reach. The replica holds three kinds of number:
// A, leased before it stopped, whose record it has, stale; B, leased and
// given back before it stopped, then leased again after, whose record it
// has from the first owner; C and D, leased after, of which it knows
// nothing. New owners take all four from the replica while the old ones
// go on issuing until their leases run out by their own clocks. The
// replica is another server than the one the namespace's record names, so
// the new owners wait out the loss window: each issues only after its
// number's old owner stopped, so no ID repeats. The control run, without
// that wait, must find a new owner issuing before its old owner's last
// ID, or a repeated ID.
func TestRedisFailoverToLaggingReplica(t *testing.T) {
	t.Parallel() // slow, and mostly waiting: overlap with the rest
	// run runs the scenario and returns how many duplicates it found.
	run := func(t *testing.T, defended bool) int {
		ctx := testenv.Deadline(t, 2*time.Minute)
		master := private.StartRedis(t)
		replica := private.StartRedisReplica(t, master.Addr())
		px := startProxy(t, master.Addr())
		o := Options{Layout: twoBits}
		olds := redisPool(t, px.Addr(), "fo:", o)
		news := redisPoolWithout(t, replica.Addr(), "fo:", Options{Layout: twoBits, WaitForFree: true},
			defences{noLossWait: !defended})
		trustRecord(t, olds)
		c := newCollector()
		a := acquire(t, olds)
		c.run("A", generator(t, a))
		b0 := acquire(t, olds)
		c.run("B, first owner", generator(t, b0))
		c.waitIssuedUntil(ctx, t, 100, "A", "B, first owner")
		closeLease(t, b0)
		replica.WaitSynced(master.Addr(), 30*time.Second)

		// The replica stops following: from here on it lags.
		replica.Promote()
		frozen := replica.Client().ZScore(ctx, olds.store.(*redisStore).hw, fmt.Sprint(a.Worker())).Val()
		b := acquire(t, olds)
		if b.Worker() != b0.Worker() {
			t.Fatalf("the second owner of B took %d, not the number given back, %d", b.Worker(), b0.Worker())
		}
		c.run("B", generator(t, b))
		after := acquireN(t, olds, 2)
		c.run("C", generator(t, after[0]))
		c.run("D", generator(t, after[1]))
		old := []*Lease{a, b, after[0], after[1]}
		// The replica's lag, measured: every old lease renews twice more
		// on the master, so that the replica's record of A is behind the
		// master's by two renewals, more than Margin.
		base := map[*Lease]int64{}
		for _, l := range old {
			base[l] = l.Status().Renewals
		}
		// A lease whose renewals a busy machine timed out until it
		// expired renews no more: that run did not reach the scenario,
		// and another is made. A starved CPU may hold a renewal well
		// past RenewEvery, so the wait is 30 s.
		waitFor(t, 30*time.Second, "every old lease to renew twice on the master or end", func() bool {
			for _, l := range old {
				if s := l.Status(); s.State == Held && s.Renewals < base[l]+2 {
					return false
				}
			}
			return true
		})
		for _, l := range old {
			if s := l.Status(); s.State != Held {
				notMet(t, "lease on worker %d ended before it renewed twice after the freeze: %+v", l.Worker(), s)
			}
		}
		px.Cut()
		cut := time.Now()
		lag := time.Duration(master.Client().ZScore(ctx, olds.store.(*redisStore).hw, fmt.Sprint(a.Worker())).Val()-frozen) *
			time.Millisecond
		if lag <= olds.opts.Margin {
			notMet(t, "the replica's record of A lags the master's by %v, not more than Margin (%v)", lag, olds.opts.Margin)
		}

		// Failover: the old owners cannot reach the new master.
		byWorker := map[int64]string{a.Worker(): "A", b.Worker(): "B", after[0].Worker(): "C", after[1].Worker(): "D"}
		var newNames []string
		for _, l := range acquireN(t, news, 4) {
			name := "new on " + byWorker[l.Worker()]
			newNames = append(newNames, name)
			c.run(name, generator(t, l))
		}
		waitExpired(t, old)
		c.waitIssuedUntil(ctx, t, 100, newNames...)
		px.Retarget(replica.Addr())
		px.Restore()
		lists := c.finish()
		for _, name := range []string{"A", "B", "C", "D"} {
			if last := lastIssued(twoBits, lists[name]); !last.After(cut) {
				notMet(t, "old owner %s issued nothing after the failover (last ID at %s)", name, last)
			}
		}
		dups, total := duplicates(lists)
		kinds := map[string]int{}
		for _, id := range duplicateIDs(lists) {
			kinds[byWorker[twoBits.Decode(id).Worker]]++
		}
		// A number's new owner issued while its old owner still did when
		// its first ID is not after the old owner's last: there IDs may
		// repeat. Whether they do needs both to issue in one millisecond,
		// which a busy machine makes rare; the overlap it does not.
		var overlaps []string
		for _, name := range []string{"A", "B", "C", "D"} {
			if first := firstIssued(twoBits, lists["new on "+name]); !first.IsZero() && !first.After(lastIssued(twoBits, lists[name])) {
				overlaps = append(overlaps, name)
			}
		}
		t.Logf("replica's lag %v; %d IDs, %d duplicates (A, stale record: %d; B, the first owner's record: %d; C and D, no record: %d); "+
			"new owners issuing before their old owners' last ID: %v", lag, total, dups, kinds["A"], kinds["B"], kinds["C"]+kinds["D"], overlaps)
		if defended && (dups > 0 || len(overlaps) > 0) {
			t.Fatalf("%d duplicate IDs among %d; new owners of %v issued before their old owners' last ID", dups, total, overlaps)
		}
		return dups + len(overlaps)
	}
	t.Run("defended", func(t *testing.T) {
		t.Parallel()
		tryReach(t, func(t *testing.T) bool {
			run(t, true)
			return true
		})
	})
	t.Run("control: no wait", func(t *testing.T) {
		t.Parallel()
		tryControl(t, func(t *testing.T) bool { return run(t, false) > 0 })
	})
}
