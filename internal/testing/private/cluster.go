package private

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// Cluster is a private Redis Cluster of master nodes that belongs to
// one test, which may reconfigure it (move slots, kill nodes), unlike the
// shared cluster of redisCluster(t). Make one with StartRedisCluster.
type Cluster struct {
	t      testing.TB
	nodes  []*RedisServer
	ids    []string // node IDs, by index
	client *redis.ClusterClient
}

// StartRedisCluster starts n (at least 3) cluster-enabled redis-servers,
// each as StartRedis does with extraArgs added, joins them into one
// cluster of masters sharing the slots evenly (as the shared test cluster
// is made: both use launch.StartCluster), and returns once every node
// reports the cluster ok. Needs redis-cli beside redis-server or in PATH.
func StartRedisCluster(t testing.TB, n int, extraArgs ...string) *Cluster {
	t.Helper()
	bin, cli := redisBinaries(t)
	if cli == "" {
		testenv.Skip(t, "redis-cli not found beside redis-server or in PATH "+
			"(Debian: apt-get install redis-tools), or run `make test`")
	}
	dir := t.TempDir()
	ctx, cancel := testenv.OpContext(2 * testenv.OpTimeout)
	defer cancel()
	nodes, err := launch.StartCluster(ctx, launch.ClusterConfig{Bin: bin, Cli: cli, Dir: dir, Nodes: n, Args: extraArgs})
	if err != nil {
		t.Fatalf("private: %v", err)
	}
	c := &Cluster{t: t}
	for _, r := range nodes {
		c.nodes = append(c.nodes, ownRedis(t, r))
	}
	for _, node := range c.nodes {
		c.ids = append(c.ids, node.do("CLUSTER", "MYID"))
		node.Client() // made here, so that MigrateSlot may run on any goroutine
	}
	c.client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = c.client.Close() })
	return c
}

// Addrs returns the nodes' addresses, by node index.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the nodes' servers, by node index, to kill or inspect one.
func (c *Cluster) Nodes() []*RedisServer { return c.nodes }

// Client returns a cluster client of the cluster, closed when the test
// ends.
func (c *Cluster) Client() *redis.ClusterClient { return c.client }

// KeySlot returns the hash slot of key (CLUSTER KEYSLOT).
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	n, err := c.nodes[0].Client().ClusterKeySlot(ctx, key).Result()
	return int(n), err
}

// SlotOwner returns the index of the node that serves slot, as node 0
// sees the cluster.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (int, error) {
	shards, err := c.nodes[0].Client().ClusterShards(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("private: CLUSTER SHARDS: %w", err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= int64(slot) && int64(slot) <= r.End {
				for _, n := range sh.Nodes {
					if n.Role == "master" {
						return c.index(n.ID, net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)))
					}
				}
			}
		}
	}
	return 0, fmt.Errorf("private: slot %d is served by no node", slot)
}

// index finds a node by ID or address.
func (c *Cluster) index(id, addr string) (int, error) {
	for i := range c.nodes {
		if c.ids[i] == id || c.nodes[i].Addr() == addr {
			return i, nil
		}
	}
	return 0, fmt.Errorf("private: node %s (%s) is not one of this cluster's", id, addr)
}

// MigrateOptions tune MigrateSlot.
type MigrateOptions struct {
	// Batch is the number of keys moved by one MIGRATE; default 10.
	Batch int
	// timeout is MIGRATE's own timeout for one batch; default 5s.
	timeout time.Duration
	// Step, if set, is called with the number of keys moved so far while
	// the slot is migrating: before the first batch, between batches and
	// after the last one, before the slot changes owner. A test runs
	// operations there that meet ASK redirections and keys split between
	// two nodes. An error from Step stops MigrateSlot, which returns it
	// and leaves the slot migrating; MigrateSlot with the same target
	// resumes the migration.
	Step func(moved int) error
	// Order, if set, puts the slot's keys in the order in which to move
	// them, instead of the order of the server's CLUSTER GETKEYSINSLOT
	// (which differs between Redis and its forks): MigrateSlot lists
	// every key of the slot first, and moves keys made after that last,
	// in the server's order. Order may reorder keys in place.
	Order func(keys []string)
}

// MigrateSlot moves slot to the node at index to, with keys, by Redis
// Cluster's resharding protocol as redis-cli --cluster reshard runs it:
// CLUSTER SETSLOT IMPORTING on the target and MIGRATING on the source,
// CLUSTER GETKEYSINSLOT and MIGRATE in batches until the slot is empty on
// the source, then CLUSTER SETSLOT NODE on the target, the source and
// every other node. It returns the number of keys moved; moving a slot to
// the node that has it does nothing. It may be called from any goroutine.
func (c *Cluster) MigrateSlot(ctx context.Context, slot, to int, opts MigrateOptions) (int, error) {
	if to < 0 || to >= len(c.nodes) {
		return 0, fmt.Errorf("private: migrate slot %d to node %d: the cluster has nodes 0-%d", slot, to, len(c.nodes)-1)
	}
	if opts.Batch <= 0 {
		opts.Batch = 10
	}
	if opts.timeout <= 0 {
		opts.timeout = 5 * time.Second
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		return 0, err
	}
	if from == to {
		return 0, nil
	}
	src, dst := c.nodes[from].Client(), c.nodes[to].Client()
	setslot := func(node *redis.Client, args ...any) error {
		return node.Do(ctx, append([]any{"CLUSTER", "SETSLOT", slot}, args...)...).Err()
	}
	if err := setslot(dst, "IMPORTING", c.ids[from]); err != nil {
		return 0, fmt.Errorf("private: slot %d IMPORTING on node %d: %w", slot, to, err)
	}
	if err := setslot(src, "MIGRATING", c.ids[to]); err != nil {
		return 0, fmt.Errorf("private: slot %d MIGRATING on node %d: %w", slot, from, err)
	}
	host, port, _ := net.SplitHostPort(c.nodes[to].Addr())
	var planned []string
	if opts.Order != nil {
		n, err := src.ClusterCountKeysInSlot(ctx, slot).Result()
		if err == nil {
			planned, err = src.ClusterGetKeysInSlot(ctx, slot, int(n)+1).Result()
		}
		if err != nil {
			return 0, fmt.Errorf("private: list the keys of slot %d on node %d: %w", slot, from, err)
		}
		opts.Order(planned)
	}
	moved := 0
	for {
		if opts.Step != nil {
			if err := opts.Step(moved); err != nil {
				return moved, err
			}
		}
		var keys []string
		if len(planned) > 0 {
			keys = planned[:min(opts.Batch, len(planned))]
			planned = planned[len(keys):]
		} else if keys, err = src.ClusterGetKeysInSlot(ctx, slot, opts.Batch).Result(); err != nil {
			return moved, fmt.Errorf("private: GETKEYSINSLOT %d on node %d: %w", slot, from, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, opts.timeout.Milliseconds(), "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		// A reply of NOKEY, not an error, says the keys expired or were
		// deleted since GETKEYSINSLOT.
		if err := src.Do(ctx, args...).Err(); err != nil {
			return moved, fmt.Errorf("private: MIGRATE %d keys of slot %d from node %d to %d: %w",
				len(keys), slot, from, to, err)
		}
		moved += len(keys)
	}
	// The target first, so that it owns the slot before the source
	// redirects clients to it; then the source; then the rest.
	order := []int{to, from}
	for i := range c.nodes {
		if i != to && i != from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if err := setslot(c.nodes[i].Client(), "NODE", c.ids[to]); err != nil {
			return moved, fmt.Errorf("private: slot %d NODE on node %d: %w", slot, i, err)
		}
	}
	return moved, nil
}
