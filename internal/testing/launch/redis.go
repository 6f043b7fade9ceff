package launch

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
	"syscall"
	"time"
)

// FindRedis returns absolute paths of redis-server and redis-cli. server,
// if not empty, is the server to use (from an environment variable), a
// redis-server or a fork of it such as valkey-server; else redis-server is
// looked for in PATH. The client is looked for beside the server first,
// under the server's own family name (valkey-cli beside valkey-server),
// then as redis-cli beside it and in PATH, so both come from the same
// install where they can; cli is empty if there is none, which only
// StartCluster minds.
func FindRedis(server string) (serverPath, cli string, err error) {
	if server == "" {
		if server, err = exec.LookPath("redis-server"); err != nil {
			return "", "", errors.New("redis-server not found in PATH " +
				"(Debian: apt-get install redis-server redis-tools)")
		}
	}
	if server, err = filepath.Abs(server); err != nil {
		return "", "", err
	}
	dir := filepath.Dir(server)
	for _, name := range []string{strings.TrimSuffix(filepath.Base(server), "-server") + "-cli", "redis-cli"} {
		cli = filepath.Join(dir, name)
		if _, err := os.Stat(cli); err == nil {
			return server, cli, nil
		}
	}
	if cli, err = exec.LookPath("redis-cli"); err != nil {
		cli = ""
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

// freeClusterPort returns a port P such that P and its cluster bus port
// P+10000 were both free a moment ago. It draws from 20000-32767, below
// Linux's ephemeral range, so that P+10000 stays a valid port and outgoing
// connections are unlikely to grab either.
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

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// isBindError reports whether err, from starting a server, says its port
// was taken, so that a retry on another port may succeed.
func isBindError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Address already in use") || strings.Contains(s, "Could not create server TCP")
}

// Redis is a redis-server process: a standalone server, a cluster node or
// a Sentinel. Its methods are not safe for concurrent use.
type Redis struct {
	name string
	bin  string
	dir  string
	port int
	args []string // all arguments, the same at every (re)start
	proc *proc
}

// RedisConfig says how to start a redis-server.
type RedisConfig struct {
	// Bin is the redis-server binary (see FindRedis).
	Bin string
	// Dir is the server's working directory, made if missing, where it
	// keeps its data files and its log, redis.log.
	Dir string
	// name names the server in messages; default "redis-server".
	name string
	// port picks the port of an attempt to start; default FreePort. A
	// port found free may be taken before the server binds it: then the
	// start is tried twice more, each time on a port the port func picks.
	port func() (int, error)
	// Args are more redis-server options, after the defaults (which they
	// override), such as "--appendonly", "yes".
	Args []string
}

// StartRedis starts a redis-server and returns once it answers PING. It
// listens on 127.0.0.1 only and keeps nothing on disk unless cfg.Args say
// otherwise; a replica's first full sync starts at once instead of after
// the default 5s wait for more replicas.
func StartRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	return startRedis(ctx, cfg, func(port int) []string {
		return append(serverArgs(port, cfg.Dir,
			"--save", "",
			"--appendonly", "no",
			"--repl-diskless-sync-delay", "0",
		), cfg.Args...)
	})
}

// serverArgs are the options of every redis-server started here, in front
// of more.
func serverArgs(port int, dir string, more ...string) []string {
	return append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
	}, more...)
}

// startRedis starts a redis-server with the arguments args gives for a
// port, retrying on other ports when the port was taken.
func startRedis(ctx context.Context, cfg RedisConfig, args func(port int) []string) (*Redis, error) {
	if cfg.name == "" {
		cfg.name = "redis-server"
	}
	if cfg.port == nil {
		cfg.port = FreePort
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.name, err)
	}
	r := &Redis{name: cfg.name, bin: cfg.Bin, dir: cfg.Dir}
	var err error
	for attempt := 1; ; attempt++ {
		if r.port, err = cfg.port(); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.name, err)
		}
		r.args = args(r.port)
		err = r.Restart(ctx)
		if err == nil {
			return r, nil
		}
		if attempt == 3 || !isBindError(err) {
			return nil, err
		}
		// A cluster node's state names the port that was taken.
		_ = os.Remove(filepath.Join(cfg.Dir, "nodes.conf"))
	}
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across restarts.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// Dir returns the server's working directory.
func (r *Redis) Dir() string { return r.dir }

// LogPath returns the server's log file.
func (r *Redis) LogPath() string { return filepath.Join(r.dir, "redis.log") }

// running reports whether the server's process is running.
func (r *Redis) Running() bool { return r.proc != nil && !r.proc.exited() }

// Stop sends sig (SIGTERM saves data if persistence is on; SIGKILL ends
// the server as a crash would) and waits up to grace for it to exit (see
// Proc.Stop). It does nothing if the server is not running.
func (r *Redis) Stop(sig syscall.Signal, grace time.Duration) error {
	if !r.Running() {
		return nil
	}
	return r.proc.Stop(sig, grace)
}

// Restart starts a stopped server again on the same port with the same
// options, and waits until it answers PING. StartRedis starts servers
// this way too.
func (r *Redis) Restart(ctx context.Context) error {
	if r.Running() {
		return fmt.Errorf("%s at %s: restart while running", r.name, r.Addr())
	}
	cmd := exec.Command(r.bin, r.args...)
	cmd.Dir = r.dir
	// redis-server logs to its logfile; its output catches what comes
	// before it opens it.
	p, err := startProc(r.name, r.LogPath(), cmd, nil, false)
	if err != nil {
		return err
	}
	r.proc = p
	if err := waitPing(ctx, r.Addr(), p); err != nil {
		_ = p.kill()
		return err
	}
	return nil
}

// waitPing polls the server at addr, run by p, until it answers PING with
// PONG, p exits or ctx ends.
func waitPing(ctx context.Context, addr string, p *proc) error {
	for {
		reply, err := Do(ctx, addr, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("PING answered %q", reply)
		}
		if p.exited() {
			return p.exitError()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s at %s did not answer PING: %v (last error: %v)\n%s",
				p.Name(), addr, ctx.Err(), err, LogTail(p.LogPath()))
		case <-p.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}
