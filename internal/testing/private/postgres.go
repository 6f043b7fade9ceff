package private

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// PostgresServer is a PostgreSQL server that belongs to one test, which may
// kill and restart it, unlike the shared server of Postgres(t). Make one
// with StartPostgres.
//
// Its methods report failures with t.Fatal and so must be called from the
// test's goroutine.
type PostgresServer struct {
	t  testing.TB
	pg *launch.Postgres
}

// StartPostgres starts a private PostgreSQL server as the shared one of
// `make test` is started (launch.StartPostgres: a fresh database cluster
// on a free loopback port, trust authentication, fsync off) and returns
// once it accepts connections. It is stopped, and its files removed, when
// the test ends. Starting one takes a few seconds (initdb); a test that
// only needs a database of its own uses Postgres(t).
//
// Without initdb and postgres (in PATH or /usr/lib/postgresql/*/bin) the
// test is skipped, or fails when CI=true.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	return StartPostgresWith(t, PostgresOptions{})
}

// PostgresOptions tune a private PostgreSQL server.
type PostgresOptions struct {
	// Settings are server settings, "name=value", over the defaults of
	// StartPostgres: "max_connections=100", "synchronous_commit=on".
	Settings []string
}

// StartPostgresWith is StartPostgres with settings of the test's.
func StartPostgresWith(t testing.TB, opts PostgresOptions) *PostgresServer {
	t.Helper()
	return startPostgres(t, launch.PostgresConfig{Settings: opts.Settings})
}

// StartPostgresStandby starts a private PostgreSQL server that is a hot
// standby of the server at primary (host:port), made with pg_basebackup
// and streaming from it through a replication slot, and returns once it
// accepts connections. primary may be the address of a faultproxy.Proxy in
// front of the real primary, so that a test can freeze replication and let
// the standby lag; Promote fails over to it.
func StartPostgresStandby(t testing.TB, primary string, opts PostgresOptions) *PostgresServer {
	t.Helper()
	return startPostgres(t, launch.PostgresConfig{Settings: opts.Settings, Primary: primary})
}

// StartPostgresCopy starts a private PostgreSQL server that is a copy of
// the server at primary (host:port), made with pg_basebackup and started as
// a server of its own: it recovers to the end of the backup, on the
// primary's timeline, and takes writes, as a copy restored from a base
// backup (or a snapshot of the primary's disk) does. It shares the
// primary's system identifier and everything the primary held.
func StartPostgresCopy(t testing.TB, primary string, opts PostgresOptions) *PostgresServer {
	t.Helper()
	return startPostgres(t, launch.PostgresConfig{Settings: opts.Settings, Primary: primary, Copy: true})
}

func startPostgres(t testing.TB, cfg launch.PostgresConfig) *PostgresServer {
	t.Helper()
	if _, err := launch.FindPostgres(); err != nil {
		testenv.Skip(t, err.Error()+", or run `make test`")
	}
	dir, err := launch.TempDir()
	if err != nil {
		t.Fatalf("private: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := testenv.OpContext(2 * testenv.OpTimeout)
	defer cancel()
	pg, err := launch.StartPostgresConfig(ctx, filepath.Join(dir, "pg"), cfg)
	if err != nil {
		t.Fatalf("private: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop(syscall.SIGKILL, 10*time.Second) })
	return &PostgresServer{t: t, pg: pg}
}

// Addr returns the server's "127.0.0.1:PORT".
func (s *PostgresServer) Addr() string { return s.pg.Addr() }

// Pid returns the process ID of the server's postmaster (its backends are
// its children), or 0 when it is not running.
func (s *PostgresServer) Pid() int { return s.pg.Pid() }

// Promote makes a standby a primary and returns once it accepts writes,
// as a failover does: it keeps what it has received so far, which may lag
// the old primary.
func (s *PostgresServer) Promote() {
	s.t.Helper()
	ctx, cancel := testenv.OpContext(2 * testenv.OpTimeout)
	defer cancel()
	if err := s.pg.Promote(ctx); err != nil {
		s.t.Fatalf("private: %v", err)
	}
}

// URL returns a superuser URL of the server's "postgres" database, such as
// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable. It stays
// the same across restarts.
func (s *PostgresServer) URL() string { return s.pg.URL() }

// Kill ends the server and its backends at once with SIGKILL, as a crash
// would; Restart recovers. It does nothing if the server is not running.
func (s *PostgresServer) Kill() {
	s.t.Helper()
	if err := s.pg.Stop(syscall.SIGKILL, 10*time.Second); err != nil {
		s.t.Fatalf("private: kill postgres: %v", err)
	}
}

// stop shuts the server down cleanly (a fast shutdown, which ends open
// sessions) and waits for it to exit. It does nothing if the server is not
// running.
func (s *PostgresServer) stop() {
	s.t.Helper()
	if err := s.pg.Stop(syscall.SIGINT, 30*time.Second); err != nil {
		s.t.Fatalf("private: stop postgres: %v", err)
	}
}

// Restart stops the server if it is running and starts it again on the
// same port and data, and waits until it accepts connections.
func (s *PostgresServer) Restart() {
	s.t.Helper()
	s.stop()
	ctx, cancel := testenv.OpContext(2 * testenv.OpTimeout)
	defer cancel()
	if err := s.pg.Restart(ctx); err != nil {
		s.t.Fatalf("private: restart postgres: %v", err)
	}
}
