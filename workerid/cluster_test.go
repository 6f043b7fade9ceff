package workerid

import (
	"context"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestRedisCluster runs leases on a Redis Cluster: every key of a
// namespace shares one hash slot, so the scripts run on one node.
func TestRedisCluster(t *testing.T) {
	c := testenv.RedisClusterClient(t)
	o := testOptions(t, Options{Layout: sixBits, KeyPrefix: testenv.KeyPrefix(t)})
	p, err := Redis(c, o)
	if err != nil {
		t.Fatal(err)
	}
	leases := acquireN(t, p, 3)
	g := generator(t, leases[0])
	waitFor(t, 5*time.Second, "a renewal", func() bool { return leases[0].Status().Renewals > 0 })
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	if err := leases[1].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The number given back is the one a Redis pool prefers.
	if l := acquire(t, p); l.Worker() != leases[1].Worker() {
		t.Fatalf("took %d after closing %d", l.Worker(), leases[1].Worker())
	}
}
