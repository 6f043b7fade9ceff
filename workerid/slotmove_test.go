package workerid

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestRedisClusterSlotMigration moves the namespace's slot to another node
// of a private Redis Cluster while A holds the only number. Before the
// first batch the test moves the hash of marks alone, so that the
// namespace's keys are split between the two nodes, and has B try to take
// A's number then (the take script A's renewals would send after a
// lapse). A script that reaches keys it did not declare would run on the
// node that has the keys it declared and find A's lease absent there; the
// pool's scripts declare every key, so Redis refuses them (TRYAGAIN) until
// the slot is whole again: B's take fails, and after the migration B's
// Acquire finds the number held. The control run, whose take script
// declares the marks alone, must let B take A's number: two owners.
func TestRedisClusterSlotMigration(t *testing.T) {
	t.Parallel()
	for _, defended := range []bool{true, false} {
		name := map[bool]string{true: "declared keys", false: "control: undeclared keys"}[defended]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Deadline(t, 2*time.Minute)
			cl := private.StartRedisCluster(t, 3)
			o := testOptions(t, oneNumber)
			o.KeyPrefix = "mig:"
			pa, err := Redis(cl.Client(), o)
			if err != nil {
				t.Fatal(err)
			}
			o.Holder = "B"
			pb, err := redisWithout(cl.Client(), o, defences{noDeclaredKeys: !defended})
			if err != nil {
				t.Fatal(err)
			}
			trustRecord(t, pa)
			a := acquire(t, pa)
			ga := generator(t, a)
			if _, err := ga.Next(); err != nil {
				t.Fatal(err)
			}

			s := pa.store.(*redisStore)
			slot, err := cl.KeySlot(ctx, s.hw)
			if err != nil {
				t.Fatal(err)
			}
			from, err := cl.SlotOwner(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			to := (from + 1) % 3
			host, port, _ := net.SplitHostPort(cl.Nodes()[to].Addr())
			var (
				split bool
				tb    taken
				errB  error
			)
			_, migErr := cl.MigrateSlot(ctx, slot, to, private.MigrateOptions{Batch: 1, Step: func(moved int) error {
				if moved != 0 {
					return nil
				}
				// The marks move first, alone: A's lease stays behind.
				src := cl.Nodes()[from].Client()
				if err := src.Do(ctx, "MIGRATE", host, port, "", 0, 5000, "KEYS", s.hw).Err(); err != nil {
					return err
				}
				if n, err := cl.Nodes()[to].Client().Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", slot).Int(); err != nil || n != 1 {
					return fmt.Errorf("the target holds %d keys of the slot (%v), want the marks alone", n, err)
				}
				split = true
				now := pb.nowMs()
				tb, errB = pb.store.take(ctx, takeRequest{cands: []int64{a.Worker()}, token: "B/1", holder: "B",
					ttl: pb.opts.TTL.Milliseconds(), reserve: pb.reserve(now), now: now})
				return nil
			}})
			if !split {
				t.Fatalf("the migration never had the marks and A's lease on two nodes (err %v)", migErr)
			}
			t.Logf("B's take while the slot was split: %+v, %v; migration: %v", tb, errB, migErr)
			if !defended {
				if errB != nil && strings.Contains(errB.Error(), "non local key") {
					// Valkey refuses, by itself, a script that reaches a
					// key another node holds: there the fault cannot come.
					t.Skipf("control run: the server refuses the undeclared key itself (%v): no two owners can come of it", errB)
				}
				if errB != nil || tb.worker != a.Worker() {
					t.Fatalf("control run: B did not take A's number while the slot was split (%+v, %v): the test does not reach the fault", tb, errB)
				}
				if s := a.Status(); s.State == Lost || s.State == Closed {
					t.Fatalf("control run: A's lease had ended (%v) when B took its number", s.State)
				}
				return
			}
			if errB == nil && tb.worker >= 0 {
				t.Fatalf("B took number %d while A holds it: two owners", tb.worker)
			}
			if errB == nil || !strings.Contains(errB.Error(), "TRYAGAIN") {
				t.Fatalf("B's take while the slot was split: %+v, %v; want Redis's TRYAGAIN", tb, errB)
			}
			if migErr != nil {
				t.Fatal(migErr)
			}
			if owner, err := cl.SlotOwner(ctx, slot); err != nil || owner != to {
				t.Fatalf("slot %d is on node %d (%v), want %d", slot, owner, err, to)
			}
			// The slot is whole again: A renews and issues, and the number
			// is held for B.
			waitFor(t, 10*time.Second, "A to renew and issue after the migration", func() bool {
				_, err := ga.Next()
				s := a.Status()
				return err == nil && s.Failures == 0 && s.State == Held
			})
			if _, err := pb.Acquire(ctx); !errors.Is(err, ErrNoFreeWorker) {
				t.Fatalf("B's Acquire after the migration: %v; want ErrNoFreeWorker", err)
			}
		})
	}
}
