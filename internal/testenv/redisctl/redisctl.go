// Package redisctl holds what the two starters of test Redis servers share:
// the shared servers of cmd/testservers and the private ones of package
// testenv. It finds the binaries, talks the few commands the starters need
// without a client library (whose retries and logging would blur wait
// loops), picks ports that a cluster node can use, and joins servers into a
// Redis Cluster. It knows nothing of testing.TB, so the testservers command
// can use it; every call takes a context and returns errors.
package redisctl

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
	"time"
)

// Find returns absolute paths of redis-server and redis-cli. server, if
// not empty, is the redis-server to use (from an environment variable);
// else it is looked for in PATH. redis-cli is looked for beside it first,
// so both come from the same install; cli is empty if there is none, which
// only JoinCluster minds.
func Find(server string) (serverPath, cli string, err error) {
	if server == "" {
		if server, err = exec.LookPath("redis-server"); err != nil {
			return "", "", errors.New("redis-server not found in PATH " +
				"(Debian: apt-get install redis-server redis-tools)")
		}
	}
	if server, err = filepath.Abs(server); err != nil {
		return "", "", err
	}
	cli = filepath.Join(filepath.Dir(server), "redis-cli")
	if _, err := os.Stat(cli); err != nil {
		if cli, err = exec.LookPath("redis-cli"); err != nil {
			cli = ""
		}
	}
	return server, cli, nil
}

// Do sends one command to the server at addr on a connection of its own and
// returns the reply, for simple-string, error, integer and bulk-string
// replies; an error reply is returned as an error with its text.
func Do(ctx context.Context, addr string, args ...string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline := time.Now().Add(2 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
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

// Info returns the fields of INFO section (such as "replication") of the
// server at addr, "key:value" lines split into a map.
func Info(ctx context.Context, addr, section string) (map[string]string, error) {
	text, err := Do(ctx, addr, "INFO", section)
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields, nil
}

// FreeClusterPort returns a port P such that P and its cluster bus port
// P+10000 were both free a moment ago. It draws from 20000-32767, below
// Linux's ephemeral range, so that P+10000 stays a valid port and outgoing
// connections are unlikely to grab either.
func FreeClusterPort() (int, error) {
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

// IsBindError reports whether err, from starting a server, says its port
// was taken, so that a retry on another port may succeed.
func IsBindError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Address already in use") || strings.Contains(s, "Could not create server TCP")
}

// ClusterArgs returns the redis-server options that make a cluster node
// keeping its cluster state in dir.
func ClusterArgs(dir string) []string {
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", "5000",
	}
}

// JoinCluster makes a cluster of the empty cluster-enabled servers at
// addrs, all masters sharing the 16384 slots evenly, with
// redis-cli --cluster create (cli is its path); then waits until every
// node reports the cluster ok and knows all the others.
func JoinCluster(ctx context.Context, cli string, addrs []string) error {
	if cli == "" {
		return errors.New("redis-cli not found beside redis-server or in PATH (Debian: apt-get install redis-tools)")
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster create %s: %v\n%s", strings.Join(addrs, " "), err, indent(string(out)))
	}
	for _, addr := range addrs {
		if err := WaitClusterOK(ctx, addr, len(addrs)); err != nil {
			return err
		}
	}
	return nil
}

// WaitClusterOK polls CLUSTER INFO on the node at addr until it reports
// the cluster ok, every slot served and nodes nodes known.
func WaitClusterOK(ctx context.Context, addr string, nodes int) error {
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
