package workerid

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// trusting is a store that claims to keep all its data, for the control
// run of TestRedisDataLoss: it makes a pool skip the wait for a number
// without a record.
type trusting struct{ store }

func (trusting) trustsAbsence() bool { return true }

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
	var all []idtype.ID
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			dups++
		}
	}
	return dups, len(all)
}

// TestRedisDataLoss restarts Redis without persistence while four leases
// are held and issuing, then lets four new leases take the four numbers
// at once, while the old owners, cut off from Redis for a moment, still
// believe they hold them. Because the new owners find no record of the
// numbers, they wait out one TTL before their first ID, by when the old
// owners have stopped: no ID repeats. The control run skips that wait and
// must find duplicates, which shows the test can see them.
func TestRedisDataLoss(t *testing.T) {
	twoBits := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}
	for _, fence := range []bool{true, false} {
		name := map[bool]string{true: "waits out a TTL", false: "control: no wait"}[fence]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
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
			case !fence && dups == 0:
				t.Fatalf("control run without the wait found no duplicate among %d IDs: the test cannot see them", total)
			}
		})
	}
}
