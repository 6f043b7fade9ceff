// Command testservers starts the servers that snowkey's integration tests
// need, runs one command with their addresses in its environment, stops the
// servers and exits with the command's exit code.
//
// Usage:
//
//	testservers [flags] -- command [args...]
//
// For example, from the repository root:
//
//	go run ./internal/testenv/cmd/testservers -- go test -race ./...
//
// It starts, on free loopback ports, in a temporary directory that it
// removes afterwards:
//
//   - PostgreSQL (initdb + postgres; as user "postgres" when run as root,
//     because PostgreSQL refuses root), trust authentication on 127.0.0.1,
//     fsync off, max_connections=200;
//   - one standalone redis-server without persistence;
//   - a Redis Cluster of three masters, made with redis-cli --cluster create.
//
// and exports to the command:
//
//	SNOWKEY_TEST_POSTGRES       postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
//	SNOWKEY_TEST_REDIS          127.0.0.1:PORT
//	SNOWKEY_TEST_REDIS_CLUSTER  127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
//	SNOWKEY_TEST_REDIS_SERVER   absolute path of redis-server
//
// A variable that is already set is passed on unchanged and its server is
// not started, so tests can be pointed at servers of one's own. The flags
// -postgres, -redis and -cluster (all true by default) choose which servers
// to start. SIGINT and SIGTERM are passed on to the command; a second one
// kills it. Every wait has a timeout. If testservers fails before running
// the command it exits with status 125 and says why, with the tail of the
// failing server's log.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The environment variables read by package internal/testenv.
const (
	envPostgres     = "SNOWKEY_TEST_POSTGRES"
	envRedis        = "SNOWKEY_TEST_REDIS"
	envRedisCluster = "SNOWKEY_TEST_REDIS_CLUSTER"
	envRedisServer  = "SNOWKEY_TEST_REDIS_SERVER"
)

// exitSetup is the exit status when testservers itself fails.
const exitSetup = 125

func main() {
	os.Exit(run())
}

type options struct {
	postgres, redis, cluster bool
	timeout                  time.Duration
	quiet                    bool
	command                  []string
}

func parseFlags() (options, error) {
	var o options
	fs := flag.NewFlagSet("testservers", flag.ContinueOnError)
	fs.BoolVar(&o.postgres, "postgres", true, "start PostgreSQL and export "+envPostgres)
	fs.BoolVar(&o.redis, "redis", true, "start a standalone redis-server and export "+envRedis)
	fs.BoolVar(&o.cluster, "cluster", true, "start a 3-node Redis Cluster and export "+envRedisCluster)
	fs.DurationVar(&o.timeout, "timeout", 90*time.Second, "how long to wait for all servers to start")
	fs.BoolVar(&o.quiet, "q", false, "print nothing but errors")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: testservers [flags] -- command [args...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return o, err
	}
	o.command = fs.Args()
	if len(o.command) == 0 {
		fs.Usage()
		return o, errors.New("no command given")
	}
	return o, nil
}

func run() int {
	o, err := parseFlags()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "testservers:", err)
		return 2
	}
	logf := func(format string, args ...any) {
		if !o.quiet {
			fmt.Fprintf(os.Stderr, "testservers: "+format+"\n", args...)
		}
	}

	// Notify before starting anything, so no signal is lost in between.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)

	s := &session{logf: logf}
	defer s.cleanup()

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	started := make(chan error, 1)
	go func() { started <- s.start(ctx, o) }()
	select {
	case err = <-started:
	case sig := <-sigs:
		logf("%v while starting servers; stopping", sig)
		cancel()
		<-started
		return 128 + int(sig.(syscall.Signal))
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testservers:", err)
		return exitSetup
	}
	return s.runCommand(o.command, sigs)
}

// session holds what testservers started, to be stopped by cleanup.
type session struct {
	logf func(string, ...any)

	mu    sync.Mutex
	dir   string
	procs []*proc
	env   []string
}

func (s *session) add(env string, procs ...*proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = append(s.procs, procs...)
	if env != "" {
		s.env = append(s.env, env)
	}
}

// start brings up every requested server that the environment does not
// already name, in parallel.
func (s *session) start(ctx context.Context, o options) error {
	t0 := time.Now()
	var err error
	if s.dir, err = makeTempDir(); err != nil {
		return err
	}

	needRedis := (o.redis && os.Getenv(envRedis) == "") || (o.cluster && os.Getenv(envRedisCluster) == "")
	server, cli, rerr := findRedis()
	switch {
	case rerr == nil && os.Getenv(envRedisServer) == "":
		s.add(envRedisServer + "=" + server)
	case rerr != nil && needRedis:
		return rerr
	}

	var wg sync.WaitGroup
	errs := make([]error, 3)
	if o.postgres {
		if os.Getenv(envPostgres) != "" {
			s.logf("using %s from the environment", envPostgres)
		} else {
			wg.Go(func() {
				p, url, err := startPostgres(ctx, filepath.Join(s.dir, "pg"), s.logf)
				if err == nil {
					s.add(envPostgres+"="+url, p)
				}
				errs[0] = err
			})
		}
	}
	if o.redis {
		if os.Getenv(envRedis) != "" {
			s.logf("using %s from the environment", envRedis)
		} else {
			wg.Go(func() {
				p, addr, err := startRedis(ctx, server, filepath.Join(s.dir, "redis"), s.logf)
				if err == nil {
					s.add(envRedis+"="+addr, p)
				}
				errs[1] = err
			})
		}
	}
	if o.cluster {
		if os.Getenv(envRedisCluster) != "" {
			s.logf("using %s from the environment", envRedisCluster)
		} else {
			wg.Go(func() {
				procs, addrs, err := startCluster(ctx, server, cli, filepath.Join(s.dir, "cluster"), s.logf)
				if err == nil {
					s.add(envRedisCluster+"="+strings.Join(addrs, ","), procs...)
				}
				errs[2] = err
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.logf("servers up in %.1fs", time.Since(t0).Seconds())
	return nil
}

// runCommand runs the command with the servers' environment, passing on
// signals, and returns its exit status.
func (s *session) runCommand(command []string, sigs <-chan os.Signal) int {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testservers:", err)
		return exitSetup
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	for n := 0; ; {
		select {
		case <-done:
			return exitStatus(cmd.ProcessState)
		case sig := <-sigs:
			// A Ctrl-C at the terminal reaches the command by itself too;
			// passing it on once more is harmless, and a second signal
			// means the user wants out now.
			n++
			if n == 1 {
				s.logf("%v: passing it on to %s", sig, command[0])
				_ = cmd.Process.Signal(sig)
			} else {
				s.logf("%v again: killing %s", sig, command[0])
				_ = cmd.Process.Kill()
			}
		}
	}
}

// exitStatus maps a finished process to a shell-style exit status.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// cleanup stops every server (PostgreSQL with a fast shutdown, Redis with
// SIGTERM; SIGKILL for any that lingers) and removes the temporary directory.
func (s *session) cleanup() {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			sig := syscall.SIGTERM
			if p.name == "postgres" {
				sig = syscall.SIGINT // PostgreSQL's "fast" shutdown, as pg_ctl stop -m fast
			}
			if err := p.stop(sig, 15*time.Second); err != nil {
				fmt.Fprintln(os.Stderr, "testservers:", err)
			}
		})
	}
	wg.Wait()
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			fmt.Fprintln(os.Stderr, "testservers: remove temp dir:", err)
		}
	}
}

// makeTempDir makes the session's directory. When running as root it lies
// under a directory that every user can traverse, for PostgreSQL's user.
func makeTempDir() (string, error) {
	base := os.TempDir()
	if os.Geteuid() == 0 && !traversable(base) {
		base = "/tmp"
	}
	removeStale(base)
	dir, err := os.MkdirTemp(base, tempPrefix)
	if err != nil {
		return "", fmt.Errorf("make temp dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", fmt.Errorf("make temp dir: %w", err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := os.WriteFile(filepath.Join(dir, ownerFile), pid, 0o644); err != nil {
		return "", fmt.Errorf("make temp dir: %w", err)
	}
	return dir, nil
}

const (
	tempPrefix = "snowkey-testservers-"
	ownerFile  = "testservers.pid" // the pid of the testservers that owns the directory
)

// removeStale removes the directories of earlier sessions whose testservers
// is gone, killed before it could clean up (its servers died with it).
// Directories of live sessions are left alone.
func removeStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, tempPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being made
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// traversable reports whether others may search every directory on path.
func traversable(path string) bool {
	path, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	for {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(path)
		if parent == path {
			return true
		}
		path = parent
	}
}
