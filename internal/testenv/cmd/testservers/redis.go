package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testenv/redisctl"
)

// clusterSize is the number of master nodes of the test cluster.
const clusterSize = 3

// findRedis returns absolute paths of redis-server and redis-cli: the
// server from SNOWKEY_TEST_REDIS_SERVER when set, else PATH; redis-cli
// beside it first, so both come from the same install.
func findRedis() (server, cli string, err error) {
	server, cli, err = redisctl.Find(os.Getenv(envRedisServer))
	if err != nil {
		return "", "", fmt.Errorf("%w; or run with -redis=false -cluster=false", err)
	}
	return server, cli, nil
}

// redisArgs are the options of every server started here: loopback only,
// no persistence, everything inside dir.
func redisArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
	}
}

// startRedisServer starts redis-server in dir with args and waits for PING.
func startRedisServer(ctx context.Context, name, server, dir string, port int, args ...string) (*proc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(server, append(redisArgs(port, dir), args...)...)
	cmd.Dir = dir
	// redis-server logs to its logfile; stdout catches what comes before.
	p, err := startProc(name, filepath.Join(dir, "redis.log"), cmd, nil)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var last error
	for {
		reply, err := redisctl.Do(ctx, addr, "PING")
		if err == nil && reply == "PONG" {
			return p, nil
		}
		if err == nil {
			err = fmt.Errorf("PING answered %q", reply)
		}
		last = err
		if p.exited() {
			return nil, p.exitErr()
		}
		select {
		case <-ctx.Done():
			_ = p.stop(syscall.SIGKILL, time.Second)
			return nil, fmt.Errorf("%s at %s did not answer PING: %v (last error: %v)\n%s",
				name, addr, ctx.Err(), last, logTail(p.logPath))
		case <-p.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startRedis starts the standalone server and returns it with its address.
func startRedis(ctx context.Context, server, dir string, logf func(string, ...any)) (*proc, string, error) {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		p, err := startRedisServer(ctx, "redis-server", server, dir, port)
		if err == nil {
			addr := "127.0.0.1:" + strconv.Itoa(port)
			logf("redis %s ready", addr)
			return p, addr, nil
		}
		if attempt < 3 && redisctl.IsBindError(err) {
			continue
		}
		return nil, "", err
	}
}

// startCluster starts clusterSize cluster-enabled servers, joins them with
// redis-cli --cluster create (no replicas) and waits until every node
// reports cluster_state:ok and knows all the others.
func startCluster(ctx context.Context, server, cli, dir string, logf func(string, ...any)) ([]*proc, []string, error) {
	if cli == "" {
		return nil, nil, errors.New("redis-cli not found beside redis-server or in PATH " +
			"(Debian: apt-get install redis-tools; or run with -cluster=false)")
	}
	procs := make([]*proc, clusterSize)
	addrs := make([]string, clusterSize)
	errs := make([]error, clusterSize)
	stopAll := func() {
		for _, p := range procs {
			if p != nil {
				_ = p.stop(syscall.SIGKILL, time.Second)
			}
		}
	}
	var wg sync.WaitGroup
	for i := range clusterSize {
		wg.Go(func() {
			nodeDir := filepath.Join(dir, fmt.Sprintf("node%d", i))
			for attempt := 1; ; attempt++ {
				port, err := redisctl.FreeClusterPort()
				if err != nil {
					errs[i] = err
					return
				}
				p, err := startRedisServer(ctx, fmt.Sprintf("redis cluster node %d", i), server, nodeDir, port,
					redisctl.ClusterArgs(nodeDir)...)
				if err != nil && attempt < 3 && redisctl.IsBindError(err) {
					_ = os.Remove(filepath.Join(nodeDir, "nodes.conf"))
					continue
				}
				procs[i], addrs[i], errs[i] = p, "127.0.0.1:"+strconv.Itoa(port), err
				return
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopAll()
		return nil, nil, err
	}

	if err := redisctl.JoinCluster(ctx, cli, addrs); err != nil {
		stopAll()
		return nil, nil, fmt.Errorf("%v\n%s", err, logTail(procs[0].logPath))
	}
	logf("redis cluster %s ready", strings.Join(addrs, ","))
	return procs, addrs, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
