package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clusterSize is the number of master nodes of the test cluster.
const clusterSize = 3

// findRedis returns absolute paths of redis-server and redis-cli. The
// server comes from SNOWKEY_TEST_REDIS_SERVER when set, else PATH; redis-cli
// is looked for beside it first, so both come from the same install.
func findRedis() (server, cli string, err error) {
	server = os.Getenv(envRedisServer)
	if server == "" {
		if server, err = exec.LookPath("redis-server"); err != nil {
			return "", "", errors.New("redis-server not found in PATH " +
				"(Debian: apt-get install redis-server redis-tools; or run with -redis=false -cluster=false)")
		}
	}
	if server, err = filepath.Abs(server); err != nil {
		return "", "", err
	}
	cli = filepath.Join(filepath.Dir(server), "redis-cli")
	if _, err := os.Stat(cli); err != nil {
		if cli, err = exec.LookPath("redis-cli"); err != nil {
			cli = "" // only the cluster needs it; reported there
		}
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
		reply, err := redisDo(ctx, addr, "PING")
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
		if attempt < 3 && isBindError(err) {
			continue
		}
		return nil, "", err
	}
}

func isBindError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Address already in use") || strings.Contains(s, "Could not create server TCP")
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
				port, err := freeClusterPort()
				if err != nil {
					errs[i] = err
					return
				}
				p, err := startRedisServer(ctx, fmt.Sprintf("redis cluster node %d", i), server, nodeDir, port,
					"--cluster-enabled", "yes",
					"--cluster-config-file", filepath.Join(nodeDir, "nodes.conf"),
					"--cluster-node-timeout", "5000",
				)
				if err != nil && attempt < 3 && isBindError(err) {
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

	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput()
	if err != nil {
		stopAll()
		return nil, nil, fmt.Errorf("redis-cli --cluster create %s: %v\n%s", strings.Join(addrs, " "), err, indent(string(out)))
	}
	for i, addr := range addrs {
		if err := waitClusterOK(ctx, addr); err != nil {
			stopAll()
			return nil, nil, fmt.Errorf("%v\n%s", err, logTail(procs[i].logPath))
		}
	}
	logf("redis cluster %s ready", strings.Join(addrs, ","))
	return procs, addrs, nil
}

// waitClusterOK polls CLUSTER INFO on one node until the cluster is usable
// from it.
func waitClusterOK(ctx context.Context, addr string) error {
	want := []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(clusterSize)}
	var info string
	for {
		var err error
		info, err = redisDo(ctx, addr, "CLUSTER", "INFO")
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

// redisDo sends one command and returns the reply, for simple-string,
// error, integer and bulk-string replies. It is all testservers needs, and
// it keeps a client library's retries and logging out of the wait loops.
func redisDo(ctx context.Context, addr string, args ...string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(req.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
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

// freeClusterPort returns a port P such that P and its cluster bus port
// P+10000 are both free. It draws from 20000-32767, below Linux's ephemeral
// range, so that P+10000 stays a valid port and outgoing connections are
// unlikely to grab either.
func freeClusterPort() (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(12768)
		if portFree(p) && portFree(p+10000) {
			return p, nil
		}
	}
	return 0, errors.New("no free port pair (P, P+10000) found in 20000-42767")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
