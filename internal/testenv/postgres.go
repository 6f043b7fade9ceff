package testenv

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/internal/testenv/launch"
)

// Postgres creates an empty database for t alone on the server named by
// SNOWKEY_TEST_POSTGRES and returns its URL, the server's URL with the
// database name in place. The database is dropped when the test ends, even
// if connections to it are still open (DROP DATABASE … WITH (FORCE)).
//
// Without SNOWKEY_TEST_POSTGRES the test is skipped, or fails when CI=true.
func Postgres(t testing.TB) string {
	t.Helper()
	base := lookup(t, EnvPostgres, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("testenv: %s=%q is not a postgres:// URL", EnvPostgres, base)
	}

	// Lower-case letters, digits and '_' need no quoting and stay within
	// PostgreSQL's 63-byte limit on names: "t_" + 40 + "_" + 8.
	name := "t_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(sanitize(t.Name(), 40))) +
		"_" + randomHex(t, 4)
	ident := pgx.Identifier{name}.Sanitize()

	exec := func(sql string) error {
		ctx, cancel := cleanupContext()
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE DATABASE " + ident); err != nil {
		t.Fatalf("testenv: create database %s on %s: %v", name, u.Redacted(), err)
	}
	t.Cleanup(func() {
		if err := exec("DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)"); err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
		}
	})

	db := *u
	db.Path = "/" + name
	db.RawPath = ""
	return db.String()
}

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
	if _, err := launch.FindPostgres(); err != nil {
		Skip(t, err.Error()+", or run `make test`")
	}
	dir, err := launch.TempDir()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := opContext(2 * opTimeout)
	defer cancel()
	pg, err := launch.StartPostgres(ctx, filepath.Join(dir, "pg"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop(syscall.SIGKILL, 10*time.Second) })
	return &PostgresServer{t: t, pg: pg}
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
		s.t.Fatalf("testenv: kill postgres: %v", err)
	}
}

// Stop shuts the server down cleanly (a fast shutdown, which ends open
// sessions) and waits for it to exit. It does nothing if the server is not
// running.
func (s *PostgresServer) Stop() {
	s.t.Helper()
	if err := s.pg.Stop(syscall.SIGINT, 30*time.Second); err != nil {
		s.t.Fatalf("testenv: stop postgres: %v", err)
	}
}

// Restart stops the server if it is running and starts it again on the
// same port and data, and waits until it accepts connections.
func (s *PostgresServer) Restart() {
	s.t.Helper()
	s.Stop()
	ctx, cancel := opContext(2 * opTimeout)
	defer cancel()
	if err := s.pg.Restart(ctx); err != nil {
		s.t.Fatalf("testenv: restart postgres: %v", err)
	}
}
