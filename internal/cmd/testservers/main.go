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
//	go run ./internal/cmd/testservers -- go test -race ./...
//
// It starts, on free loopback ports, in a temporary directory that it
// removes afterwards, with the launchers that testenv's private servers
// use too (package internal/testing/launch):
//
//   - PostgreSQL (initdb + postgres; as user "postgres" when run as root,
//     because PostgreSQL refuses root), trust authentication on 127.0.0.1,
//     fsync off, max_connections=200;
//   - one standalone redis-server without persistence;
//   - a Redis Cluster of three masters, made with redis-cli --cluster create.
//
// and exports their addresses to the command in the environment variables
// that package internal/testing/testenv reads (testenv.EnvPostgres and the
// others; see its documentation).
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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
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
	fs.BoolVar(&o.postgres, "postgres", true, "start PostgreSQL and export "+testenv.EnvPostgres)
	fs.BoolVar(&o.redis, "redis", true, "start a standalone redis-server and export "+testenv.EnvRedis)
	fs.BoolVar(&o.cluster, "cluster", true, "start a 3-node Redis Cluster and export "+testenv.EnvRedisCluster)
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute,
		"how long to wait for all servers to start: seconds on an idle machine, minutes on one loaded many times over")
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

	mu      sync.Mutex
	dir     string
	servers []server
	env     []string
}

// server is one started server, with how cleanup stops it.
type server interface {
	Stop(sig syscall.Signal, grace time.Duration) error
}

// stopSignal is how cleanup asks a server to stop: PostgreSQL's "fast"
// shutdown (as pg_ctl stop -m fast) on SIGINT, Redis's on SIGTERM.
func stopSignal(s server) syscall.Signal {
	if _, ok := s.(*launch.Postgres); ok {
		return syscall.SIGINT
	}
	return syscall.SIGTERM
}

func (s *session) add(env string, servers ...server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers = append(s.servers, servers...)
	if env != "" {
		s.env = append(s.env, env)
	}
}

// clusterSize is the number of master nodes of the test cluster.
const clusterSize = 3

// start brings up every requested server that the environment does not
// already name, in parallel.
func (s *session) start(ctx context.Context, o options) error {
	t0 := time.Now()
	var err error
	if s.dir, err = launch.TempDir(); err != nil {
		return err
	}

	needRedis := (o.redis && os.Getenv(testenv.EnvRedis) == "") || (o.cluster && os.Getenv(testenv.EnvRedisCluster) == "")
	bin, cli, rerr := launch.FindRedis(os.Getenv(testenv.EnvRedisServer))
	switch {
	case rerr == nil && os.Getenv(testenv.EnvRedisServer) == "":
		s.add(testenv.EnvRedisServer + "=" + bin)
	case rerr != nil && needRedis:
		return fmt.Errorf("%w; or run with -redis=false -cluster=false", rerr)
	}

	var wg sync.WaitGroup
	errs := make([]error, 3)
	// use reports whether a server named by env is to be started.
	use := func(want bool, env string) bool {
		if want && os.Getenv(env) != "" {
			s.logf("using %s from the environment", env)
			return false
		}
		return want
	}
	if use(o.postgres, testenv.EnvPostgres) {
		wg.Go(func() {
			pg, err := launch.StartPostgres(ctx, filepath.Join(s.dir, "pg"))
			if err != nil {
				errs[0] = fmt.Errorf("%w; or run with -postgres=false", err)
				return
			}
			s.add(testenv.EnvPostgres+"="+pg.URL(), pg)
			s.logf("postgres %s ready (data in %s)", pg.URL(), pg.DataDir())
		})
	}
	if use(o.redis, testenv.EnvRedis) {
		wg.Go(func() {
			r, err := launch.StartRedis(ctx, launch.RedisConfig{Bin: bin, Dir: filepath.Join(s.dir, "redis")})
			if err != nil {
				errs[1] = err
				return
			}
			s.add(testenv.EnvRedis+"="+r.Addr(), r)
			s.logf("redis %s ready", r.Addr())
		})
	}
	if use(o.cluster, testenv.EnvRedisCluster) {
		wg.Go(func() {
			nodes, err := launch.StartCluster(ctx, launch.ClusterConfig{
				Bin: bin, Cli: cli, Dir: filepath.Join(s.dir, "cluster"), Nodes: clusterSize,
			})
			if err != nil {
				errs[2] = fmt.Errorf("%w; or run with -cluster=false", err)
				return
			}
			addrs := make([]string, len(nodes))
			servers := make([]server, len(nodes))
			for i, n := range nodes {
				addrs[i], servers[i] = n.Addr(), n
			}
			s.add(testenv.EnvRedisCluster+"="+strings.Join(addrs, ","), servers...)
			s.logf("redis cluster %s ready", strings.Join(addrs, ","))
		})
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

// cleanup stops every server (SIGKILL for any that lingers) and removes
// the temporary directory.
func (s *session) cleanup() {
	s.mu.Lock()
	servers := s.servers
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			if err := srv.Stop(stopSignal(srv), 15*time.Second); err != nil {
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
