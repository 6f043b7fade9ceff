package workerid

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// trusting is a store that claims to keep all its data, for the control
// run of TestRedisDataLoss: it makes a pool skip its defences against
// lost writes.
type trusting struct{ store }

func (trusting) durable() bool { return true }

// markKey returns the Redis key of a pool's high-water marks.
func markKey(p *Pool) string {
	s := p.store
	if t, ok := s.(trusting); ok {
		s = t.store
	}
	return s.(*redisStore).hw
}

// collector runs generators on leases and keeps every ID they issue.
type collector struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	ids  map[string][]idtype.ID // by who issued them
}

func newCollector() *collector {
	return &collector{stop: make(chan struct{}), ids: map[string][]idtype.ID{}}
}

// run issues IDs on g, about one every 50µs, until stop or the lease is
// lost; it waits out refusals while the lease is unconfirmed.
func (c *collector) run(name string, g *idtype.Generator) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var mine []idtype.ID
		defer func() {
			c.mu.Lock()
			c.ids[name] = append(c.ids[name], mine...)
			c.mu.Unlock()
		}()
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			id, err := g.Next()
			switch {
			case err == nil:
				mine = append(mine, id)
				time.Sleep(50 * time.Microsecond)
			case errors.Is(err, idtype.ErrLeaseLost):
				return
			default:
				time.Sleep(time.Millisecond)
			}
		}
	}()
}

func (c *collector) finish() map[string][]idtype.ID {
	close(c.stop)
	c.wg.Wait()
	return c.ids
}

// duplicates counts the IDs that occur more than once across all lists.
func duplicates(lists map[string][]idtype.ID) (dups, total int) {
	for _, l := range lists {
		total += len(l)
	}
	return len(duplicateIDs(lists)), total
}

// duplicateIDs returns each repeat of an ID across all lists.
func duplicateIDs(lists map[string][]idtype.ID) []idtype.ID {
	var all []idtype.ID
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.Sort(all)
	var dups []idtype.ID
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			dups = append(dups, all[i])
		}
	}
	return dups
}

// TestRedisDataLoss restarts Redis without persistence while four leases
// are held and issuing, then lets four new leases take the four numbers
// at once, while the old owners, cut off from Redis for a moment, still
// believe they hold them. Because the new owners find no record of the
// numbers, they wait out one TTL before their first ID, by when the old
// owners have stopped: no ID repeats. The control run skips that wait and
// must find duplicates, which shows the test can see them.
func TestRedisDataLoss(t *testing.T) {
	t.Parallel() // slow, and mostly waiting: overlap with the rest
	twoBits := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}
	// run runs the scenario and returns how many duplicates it found.
	run := func(t *testing.T, fence bool) int {
		srv := testenv.StartRedis(t) // no persistence
		px := startProxy(t, srv.Addr())
		o := Options{Layout: twoBits}
		olds := redisPool(t, px.Addr(), "loss:", o)
		news := redisPool(t, srv.Addr(), "loss:", o)
		if !fence {
			olds.store, news.store = trusting{olds.store}, trusting{news.store}
		}
		c := newCollector()
		oldLeases := acquireN(t, olds, 4)
		for i, l := range oldLeases {
			c.run("old "+string(rune('0'+i)), generator(t, l))
		}
		time.Sleep(300 * time.Millisecond)

		px.Cut()
		srv.Kill()
		srv.Restart()
		restarted := time.Now()
		newLeases := acquireN(t, news, 4)
		waited := time.Since(restarted)
		for i, l := range newLeases {
			c.run("new "+string(rune('0'+i)), generator(t, l))
		}
		time.Sleep(300 * time.Millisecond)
		px.Restore()
		for _, l := range oldLeases {
			select {
			case <-l.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("old owner of worker %d did not learn it lost it", l.Worker())
			}
		}
		time.Sleep(200 * time.Millisecond)
		lists := c.finish()
		for who, ids := range lists {
			if len(ids) == 0 {
				t.Fatalf("%s issued no ID: the test proves nothing", who)
			}
		}
		dups, total := duplicates(lists)
		t.Logf("new owners ready %v after the restart; %d IDs, %d duplicates", waited.Round(time.Millisecond), total, dups)
		switch {
		case fence && dups > 0:
			t.Fatalf("%d duplicate IDs among %d", dups, total)
		case fence && waited < news.opts.TTL:
			t.Fatalf("new owners issued %v after the restart, before one TTL (%v)", waited, news.opts.TTL)
		}
		return dups
	}
	t.Run("waits out a TTL", func(t *testing.T) {
		t.Parallel()
		run(t, true)
	})
	t.Run("control: no wait", func(t *testing.T) {
		t.Parallel()
		tryControl(t, func(t *testing.T) bool { return run(t, false) > 0 })
	})
}

// TestRedisFailoverToLaggingReplica fails over to a replica that stopped
// following its master 600ms earlier (more than two renewals, less than a
// TTL), while the old owners cannot reach it: two numbers were leased
// before the replica stopped, so it has their records, stale; two after,
// so it has none. New owners take all four from the replica. The old
// owners go on issuing until their leases run out by their own clocks,
// yet no ID repeats: the stale marks run a TTL ahead, and the numbers
// without a record are waited out. The control run, without those
// defences, must find duplicates.
func TestRedisFailoverToLaggingReplica(t *testing.T) {
	t.Parallel() // slow, and mostly waiting: overlap with the rest
	twoBits := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}
	// run runs the scenario and returns how many duplicates it found.
	run := func(t *testing.T, defended bool) int {
		master := testenv.StartRedis(t)
		host, port, _ := strings.Cut(master.Addr(), ":")
		replica := testenv.StartRedis(t, "--replicaof", host, port)
		rc := redisClient(t, replica.Addr())
		waitFor(t, 30*time.Second, "the replica to sync", func() bool {
			info, _ := rc.Info(t.Context(), "replication").Result()
			return strings.Contains(info, "master_link_status:up")
		})
		px := startProxy(t, master.Addr())
		o := Options{Layout: twoBits}
		olds := redisPool(t, px.Addr(), "fo:", o)
		news := redisPool(t, replica.Addr(), "fo:", o)
		if !defended {
			olds.store, news.store = trusting{olds.store}, trusting{news.store}
		}
		c := newCollector()
		before := map[int64]bool{} // the workers leased before the replica stopped
		for i, l := range acquireN(t, olds, 2) {
			before[l.Worker()] = true
			c.run(fmt.Sprintf("old %d (worker %d, before)", i, l.Worker()), generator(t, l))
		}
		hw := markKey(olds)
		waitFor(t, 5*time.Second, "the replica to have two records", func() bool {
			return rc.HLen(t.Context(), hw).Val() == 2
		})

		// The replica stops following: from here on it lags.
		if err := rc.ReplicaOf(t.Context(), "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		frozen := time.Now()
		for i, l := range acquireN(t, olds, 2) {
			c.run(fmt.Sprintf("old %d (worker %d, after)", i+2, l.Worker()), generator(t, l))
		}
		time.Sleep(600*time.Millisecond - time.Since(frozen))

		// Failover: the old owners cannot reach the new master yet.
		px.Cut()
		for i, l := range acquireNWhenFree(t, news, 4, 30*time.Second) {
			c.run(fmt.Sprintf("new %d (worker %d)", i, l.Worker()), generator(t, l))
		}
		time.Sleep(300 * time.Millisecond)
		px.Retarget(replica.Addr())
		px.Restore()
		time.Sleep(300 * time.Millisecond)
		lists := c.finish()
		for who, ids := range lists {
			if len(ids) == 0 {
				t.Fatalf("%s issued no ID: the test proves nothing", who)
			}
		}
		dups, total := duplicates(lists)
		// Which kind of number repeated: stale record, or none.
		kinds := map[bool]int{}
		for _, id := range duplicateIDs(lists) {
			kinds[before[twoBits.Decode(id).Worker]]++
		}
		t.Logf("%d IDs, %d duplicates (%d on numbers with a stale record, %d on numbers without one)",
			total, dups, kinds[true], kinds[false])
		if defended && dups > 0 {
			t.Fatalf("%d duplicate IDs among %d", dups, total)
		}
		// The control finds them on both kinds of number, unless a
		// loaded machine delayed the old owners' renewals in the window.
		return dups
	}
	t.Run("defended", func(t *testing.T) {
		t.Parallel()
		run(t, true)
	})
	t.Run("control: undefended", func(t *testing.T) {
		t.Parallel()
		tryControl(t, func(t *testing.T) bool { return run(t, false) > 0 })
	})
}
