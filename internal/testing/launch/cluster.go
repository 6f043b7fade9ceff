package launch

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ClusterConfig says how to start a Redis Cluster.
type ClusterConfig struct {
	// Bin and Cli are redis-server and redis-cli (see FindRedis).
	Bin, Cli string
	// Dir holds one working directory per node, node0, node1, ….
	Dir string
	// Nodes is the number of masters, at least 3.
	Nodes int
	// Args are more redis-server options for every node.
	Args []string
}

// StartCluster starts cfg.Nodes cluster-enabled redis-servers in
// parallel, on ports whose cluster bus port (P+10000) is free too, joins
// them into one cluster of masters sharing the 16384 slots evenly with
// redis-cli --cluster create, and returns them, by node index, once every
// node reports the cluster ok. On failure it stops the nodes it started.
func StartCluster(ctx context.Context, cfg ClusterConfig) ([]*Redis, error) {
	if cfg.Nodes < 3 {
		return nil, fmt.Errorf("a Redis Cluster needs at least 3 masters, not %d", cfg.Nodes)
	}
	if cfg.Cli == "" {
		return nil, errors.New("redis-cli not found beside redis-server or in PATH " +
			"(Debian: apt-get install redis-tools)")
	}
	nodes := make([]*Redis, cfg.Nodes)
	errs := make([]error, cfg.Nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			dir := filepath.Join(cfg.Dir, "node"+strconv.Itoa(i))
			nodes[i], errs[i] = StartRedis(ctx, RedisConfig{
				Bin:  cfg.Bin,
				Dir:  dir,
				name: "redis cluster node " + strconv.Itoa(i),
				port: freeClusterPort,
				Args: append(clusterArgs(dir), cfg.Args...),
			})
		})
	}
	wg.Wait()
	stopAll := func() {
		for _, n := range nodes {
			if n != nil {
				_ = n.Stop(syscall.SIGKILL, time.Second)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		stopAll()
		return nil, err
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	if err := joinCluster(ctx, cfg.Cli, addrs); err != nil {
		stopAll()
		return nil, fmt.Errorf("%v\n%s", err, LogTail(nodes[0].LogPath()))
	}
	return nodes, nil
}

// clusterArgs returns the redis-server options that make a cluster node
// keeping its cluster state in dir.
func clusterArgs(dir string) []string {
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", "5000",
	}
}

// joinCluster makes a cluster of the empty cluster-enabled servers at
// addrs, all masters sharing the 16384 slots evenly, with
// redis-cli --cluster create (cli is its path); then waits until every
// node reports the cluster ok and knows all the others.
func joinCluster(ctx context.Context, cli string, addrs []string) error {
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster create %s: %v\n%s", strings.Join(addrs, " "), err, indent(string(out)))
	}
	for _, addr := range addrs {
		if err := waitClusterOK(ctx, addr, len(addrs)); err != nil {
			return err
		}
	}
	return nil
}

// waitClusterOK polls CLUSTER INFO on the node at addr until it reports
// the cluster ok, every slot served and nodes nodes known.
func waitClusterOK(ctx context.Context, addr string, nodes int) error {
	want := []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(nodes)}
	var info string
	for {
		var err error
		info, err = Do(ctx, addr, "CLUSTER", "INFO")
		if err == nil && containsAll(info, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis cluster node %s not ready: %v; CLUSTER INFO: %q (error %v)",
				addr, ctx.Err(), info, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
