package private_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/faultproxy"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestRedisReplicaLagAndPromote replicates through a proxy, freezes the
// proxy so the replica lags, and promotes the replica: what the primary
// took meanwhile is not on the new primary.
func TestRedisReplicaLagAndPromote(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	primary := private.StartRedis(t)
	link := faultproxy.Start(t, primary.Addr())
	replica := private.StartRedisReplica(t, link.Addr())
	if r := replica.Info("replication"); r["role"] != "slave" || r["master_link_status"] != "up" {
		t.Fatalf("replica INFO replication: %v", r)
	}

	p, r := primary.Client(), replica.Client()
	if err := p.Set(ctx, "k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	replica.WaitSynced(primary.Addr(), 30*time.Second)
	if v, err := r.Get(ctx, "k").Result(); err != nil || v != "1" {
		t.Fatalf("replica after sync: %q, %v", v, err)
	}
	if err := r.Set(ctx, "x", "1", 0).Err(); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("write to the replica: %v; want READONLY", err)
	}

	link.Freeze()
	if err := p.Set(ctx, "k", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if po, ro := primary.ReplicationOffset(), replica.ReplicationOffset(); ro >= po {
		t.Fatalf("frozen link: replica offset %d, primary %d; want it behind", ro, po)
	}
	if v, _ := r.Get(ctx, "k").Result(); v != "1" {
		t.Fatalf("lagging replica has k=%q; want the old 1", v)
	}

	replica.Promote()
	if role := replica.Info("replication")["role"]; role != "master" {
		t.Fatalf("promoted replica has role %s", role)
	}
	if err := r.Set(ctx, "x", "1", 0).Err(); err != nil {
		t.Fatalf("write to the promoted replica: %v", err)
	}
	if v, _ := r.Get(ctx, "k").Result(); v != "1" {
		t.Fatalf("promoted replica has k=%q; want 1, the write it never got lost", v)
	}
	link.Thaw()

	// And back: the old primary becomes the replica of the new one.
	primary.ReplicaOf(replica.Addr())
	primary.WaitSynced(replica.Addr(), 30*time.Second)
	if v, _ := p.Get(ctx, "k").Result(); v != "1" {
		t.Fatalf("old primary after resync: k=%q; want 1", v)
	}
}

// TestRedisConfigSetMaxmemory fills a private server under noeviction.
func TestRedisConfigSetMaxmemory(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := private.StartRedis(t)
	s.ConfigSet("maxmemory-policy", "noeviction")
	used := s.Info("memory")["used_memory"]
	s.ConfigSet("maxmemory", used) // full already
	if got := s.Info("memory")["maxmemory_policy"]; got != "noeviction" {
		t.Fatalf("maxmemory_policy %q", got)
	}
	err := s.Client().Set(ctx, "big", strings.Repeat("x", 64<<10), 0).Err()
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("write past maxmemory: %v; want OOM", err)
	}
}

// TestRedisClusterMigrateSlot moves a slot with keys from one node to
// another and, between batches, reads and writes keys on both sides.
func TestRedisClusterMigrateSlot(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := private.StartRedisCluster(t, 3)
	if len(c.Addrs()) != 3 || len(c.Nodes()) != 3 {
		t.Fatalf("%d nodes", len(c.Addrs()))
	}
	cc := c.Client()
	const n = 25
	for i := range n {
		if err := cc.Set(ctx, fmt.Sprintf("{m}:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slot, err := c.KeySlot(ctx, "{m}")
	if err != nil {
		t.Fatal(err)
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := (from + 1) % 3

	var steps []int
	var asked atomic.Int64
	moved, err := c.MigrateSlot(ctx, slot, to, private.MigrateOptions{Batch: 10, Step: func(moved int) error {
		steps = append(steps, moved)
		// Mid-migration: a key still on the source, one already moved
		// (reached by an ASK redirection) and a new one.
		for _, i := range []int{0, n - 1} {
			if v, err := cc.Get(ctx, fmt.Sprintf("{m}:%d", i)).Int(); err != nil || v != i {
				return fmt.Errorf("GET {m}:%d after %d moved: %d, %v", i, moved, v, err)
			}
		}
		asked.Add(1)
		return cc.Set(ctx, fmt.Sprintf("{m}:new%d", moved), 1, 0).Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	// New keys made mid-migration went to the target (by ASK), so only
	// the first n moved.
	if want := "[0 10 20 25]"; fmt.Sprint(steps) != want || moved != n {
		t.Errorf("steps %v, moved %d; want %s, %d", steps, moved, want, n)
	}
	if owner, err := c.SlotOwner(ctx, slot); err != nil || owner != to {
		t.Fatalf("slot %d owner %d, %v; want %d", slot, owner, err, to)
	}
	for i, node := range c.Nodes() {
		keys, err := node.Client().ClusterCountKeysInSlot(ctx, slot).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int64{true: int64(n + len(steps)), false: 0}[i == to]; keys != want {
			t.Errorf("node %d holds %d keys of slot %d; want %d", i, keys, slot, want)
		}
	}
	for i := range n {
		if v, err := cc.Get(ctx, fmt.Sprintf("{m}:%d", i)).Int(); err != nil || v != i {
			t.Fatalf("after migration GET {m}:%d: %d, %v", i, v, err)
		}
	}
	// Every node agrees, and a stale client is redirected.
	for _, node := range c.Nodes() {
		if err := node.Client().Get(ctx, "{m}:0").Err(); err != nil && !strings.HasPrefix(err.Error(), "MOVED") {
			t.Errorf("node %s: %v", node.Addr(), err)
		}
	}
	if again, err := c.MigrateSlot(ctx, slot, to, private.MigrateOptions{}); err != nil || again != 0 {
		t.Errorf("migrating to the owner again: %d, %v", again, err)
	}
	if asked.Load() < 3 {
		t.Errorf("Step ran %d times", asked.Load())
	}
}

// TestRedisClusterMigrateResume stops a migration midway by Step's error
// and resumes it.
func TestRedisClusterMigrateResume(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := private.StartRedisCluster(t, 3)
	cc := c.Client()
	for i := range 5 {
		if err := cc.Set(ctx, fmt.Sprintf("{r}:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slot, _ := c.KeySlot(ctx, "{r}")
	from, _ := c.SlotOwner(ctx, slot)
	to := (from + 2) % 3
	stop := fmt.Errorf("stop here")
	moved, err := c.MigrateSlot(ctx, slot, to, private.MigrateOptions{Batch: 2, Step: func(moved int) error {
		if moved >= 2 {
			return stop
		}
		return nil
	}})
	if err != stop || moved != 2 {
		t.Fatalf("stopped migration: %d, %v", moved, err)
	}
	// Half-way: the source still owns the slot and answers with ASK for
	// moved keys; the cluster client follows.
	if owner, _ := c.SlotOwner(ctx, slot); owner != from {
		t.Fatalf("owner mid-migration %d, want %d", owner, from)
	}
	for i := range 5 {
		if v, err := cc.Get(ctx, fmt.Sprintf("{r}:%d", i)).Int(); err != nil || v != i {
			t.Fatalf("mid-migration GET {r}:%d: %d, %v", i, v, err)
		}
	}
	asks := 0
	for i := range 5 {
		err := c.Nodes()[from].Client().Get(ctx, fmt.Sprintf("{r}:%d", i)).Err()
		if err != nil && strings.HasPrefix(err.Error(), "ASK") {
			asks++
		}
	}
	if asks != 2 {
		t.Fatalf("the source redirects %d keys with ASK; want the 2 moved", asks)
	}
	moved, err = c.MigrateSlot(ctx, slot, to, private.MigrateOptions{Batch: 2})
	if err != nil || moved != 3 {
		t.Fatalf("resumed migration: %d, %v", moved, err)
	}
	if owner, _ := c.SlotOwner(ctx, slot); owner != to {
		t.Fatalf("owner after resume %d, want %d", owner, to)
	}
	if err := c.Nodes()[from].Client().Get(ctx, "{r}:0").Err(); err == nil || err == redis.Nil {
		t.Fatalf("old owner answers %v; want MOVED", err)
	}
}

// TestRedisSentinel writes through a FailoverClient and finds the write on
// the master the Sentinel monitors.
func TestRedisSentinel(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	master := private.StartRedis(t)
	s := private.StartRedisSentinel(t, master.Addr())
	addr, err := s.Client().Do(ctx, "SENTINEL", "get-master-addr-by-name", private.SentinelMaster).StringSlice()
	if err != nil || strings.Join(addr, ":") != master.Addr() {
		t.Fatalf("SENTINEL get-master-addr-by-name %s: %v, %v; want %s", private.SentinelMaster, addr, err, master.Addr())
	}
	c := s.FailoverClient()
	if c != s.FailoverClient() {
		t.Error("FailoverClient made a second client")
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := master.Client().Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("the master has k=%q, %v; want the write made through the Sentinel", v, err)
	}
	s.Kill()
	if err := s.Client().Ping(ctx).Err(); err == nil {
		t.Fatal("the Sentinel answers PING after Kill")
	}
	s.Restart()
	if err := s.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("PING the Sentinel after Restart: %v", err)
	}
}

// TestStartPostgres kills a private PostgreSQL and restarts it.
func TestStartPostgres(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := private.StartPostgres(t)
	ping := func() error {
		conn, err := pgx.Connect(ctx, s.URL())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	}
	if err := ping(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := ping(); err == nil {
		t.Fatal("PostgreSQL accepts connections after Kill")
	}
	s.Kill() // a no-op on a dead server
	s.Restart()
	if err := ping(); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
}

// TestPostgresStandbyAndPromote: a standby streams what its primary
// commits, takes the primary's settings of the test's, and accepts writes
// once promoted.
func TestPostgresStandbyAndPromote(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 3*time.Minute)
	primary := private.StartPostgresWith(t, private.PostgresOptions{Settings: []string{"max_connections=50"}})
	standby := private.StartPostgresStandby(t, primary.Addr(), private.PostgresOptions{Settings: []string{"max_connections=50"}})
	exec := func(url, sql string, args ...any) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql, args...)
		return err
	}
	query := func(url, sql string, dst any) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.QueryRow(ctx, sql).Scan(dst)
	}
	var maxConns string
	if err := query(primary.URL(), "SHOW max_connections", &maxConns); err != nil || maxConns != "50" {
		t.Fatalf("primary's max_connections %q (%v), want 50", maxConns, err)
	}
	if err := exec(primary.URL(), "CREATE TABLE t (v int); INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	for {
		var v int
		if err := query(standby.URL(), "SELECT v FROM t", &v); err == nil && v == 7 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the standby never received the primary's row")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := exec(standby.URL(), "INSERT INTO t VALUES (8)"); err == nil {
		t.Fatal("a standby accepted a write before its promotion")
	}
	standby.Promote()
	if err := exec(standby.URL(), "INSERT INTO t VALUES (8)"); err != nil {
		t.Fatalf("the promoted standby refused a write: %v", err)
	}
}
