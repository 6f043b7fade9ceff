package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgFallbackUser is created when the machine runs as root and has no
// "postgres" user to run the server as.
const pgFallbackUser = "snowkey-pg"

// Postgres is a PostgreSQL server process with a database cluster of its
// own. Its methods are not safe for concurrent use.
type Postgres struct {
	bin      string // the directory of initdb and postgres
	dir      string
	cred     *syscall.Credential
	port     int
	settings []string // PostgresConfig.Settings
	proc     *proc
}

// PostgresConfig tunes a server that StartPostgresConfig starts.
type PostgresConfig struct {
	// Settings are server settings, "name=value", given after the
	// defaults and so over them: "max_connections=100",
	// "synchronous_commit=on", "shared_preload_libraries=pg_stat_statements".
	Settings []string
	// Primary, when set, is the host:port of a PostgreSQL server to
	// stream from: the database cluster is its pg_basebackup, with a
	// replication slot of its own on the primary, and the server starts
	// as its hot standby. Empty makes a fresh cluster with initdb.
	Primary string
	// Copy, with Primary, makes the pg_basebackup a server of its own
	// instead of a standby: no replication slot, no standby.signal, no
	// primary_conninfo. It recovers to the end of the backup and takes
	// writes, as a copy restored from a base backup does.
	Copy bool
}

// StartPostgres creates a database cluster in dir/data (initdb, superuser
// "postgres", trust authentication for connections and replication, UTF8,
// C locale) and starts PostgreSQL on a free loopback port, with its socket
// in dir, fsync off and max_connections=200; it returns once the server
// accepts connections. When running as root it runs PostgreSQL, which
// refuses root, as the user "postgres" (or a system user made for the
// purpose), so dir and every directory above it must be searchable by
// others (see TempDir).
func StartPostgres(ctx context.Context, dir string) (*Postgres, error) {
	return StartPostgresConfig(ctx, dir, PostgresConfig{})
}

// StartPostgresConfig is StartPostgres with settings of the caller's, or a
// hot standby of another server (see PostgresConfig).
func StartPostgresConfig(ctx context.Context, dir string, cfg PostgresConfig) (*Postgres, error) {
	bin, err := FindPostgres()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("chown %s for PostgreSQL: %w", dir, err)
		}
	}
	pg := &Postgres{bin: bin, dir: dir, cred: cred, settings: cfg.Settings}
	if cfg.Primary != "" {
		err = pg.baseBackup(ctx, cfg.Primary, cfg.Copy)
	} else {
		err = pg.initdb(ctx)
	}
	if err != nil {
		return nil, err
	}

	// A port found free can be taken before postgres binds it; try again then.
	for attempt := 1; ; attempt++ {
		if pg.port, err = FreePort(); err != nil {
			return nil, err
		}
		err = pg.Restart(ctx)
		if err == nil {
			return pg, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "could not bind") {
			return nil, err
		}
	}
}

// initdb makes a fresh database cluster.
func (pg *Postgres) initdb(ctx context.Context) error {
	initLog := filepath.Join(pg.dir, "initdb.log")
	initdb := exec.CommandContext(ctx, filepath.Join(pg.bin, "initdb"),
		"-D", pg.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions")
	initdb.Dir = pg.dir
	initdb.Env = pgEnv(pg.dir)
	// On timeout or signal, end initdb's children (postgres in bootstrap
	// mode) too, so that the directory can be removed.
	initdb.Cancel = func() error { return syscall.Kill(-initdb.Process.Pid, syscall.SIGKILL) }
	p, err := startProc("initdb", initLog, initdb, pg.cred, false)
	if err != nil {
		return err
	}
	<-p.Done()
	if p.Err() != nil {
		return fmt.Errorf("initdb failed (%v)\n%s", p.Err(), LogTail(initLog))
	}
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(pg.data(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fmt.Errorf("write pg_hba.conf: %w", err)
	}
	return nil
}

// baseBackup makes the database cluster a copy of the server at primary
// (host:port) that streams from it, through a replication slot of its own
// (so that the primary keeps the WAL a stalled standby has not received);
// or, with copy, a copy that is a server of its own.
func (pg *Postgres) baseBackup(ctx context.Context, primary string, copy bool) error {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return fmt.Errorf("standby of %q: %w", primary, err)
	}
	logPath := filepath.Join(pg.dir, "pg_basebackup.log")
	args := []string{"-D", pg.data(), "-h", host, "-p", port, "-U", "postgres", "-X", "stream", "--no-sync", "-c", "fast"}
	if !copy {
		slot := fmt.Sprintf("standby_%d_%d", os.Getpid(), time.Now().UnixNano())
		args = append(args, "-R", "-C", "-S", slot)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, "pg_basebackup"), args...)
	cmd.Dir = pg.dir
	cmd.Env = pgEnv(pg.dir)
	p, err := startProc("pg_basebackup", logPath, cmd, pg.cred, false)
	if err != nil {
		return err
	}
	<-p.Done()
	if p.Err() != nil {
		return fmt.Errorf("pg_basebackup of %s failed (%v)\n%s", primary, p.Err(), LogTail(logPath))
	}
	return nil
}

// Promote makes a standby a primary (pg_promote) and returns once it
// accepts writes: a failover to it. It keeps what it had received, which
// may lag the old primary.
func (pg *Postgres) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		return fmt.Errorf("promote %s: %w", pg.URL(), err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil || !ok {
		return fmt.Errorf("promote %s: %v (done: %v)", pg.URL(), err, ok)
	}
	return nil
}

// Pid returns the process ID of the server's postmaster, or 0 when it is
// not running.
func (pg *Postgres) Pid() int {
	if !pg.Running() {
		return 0
	}
	return pg.proc.pid()
}

// Addr returns the server's "127.0.0.1:PORT".
func (pg *Postgres) Addr() string { return fmt.Sprintf("127.0.0.1:%d", pg.port) }

// URL returns a superuser URL of the server's "postgres" database.
func (pg *Postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// DataDir returns the database cluster's directory.
func (pg *Postgres) DataDir() string { return pg.data() }

func (pg *Postgres) data() string { return filepath.Join(pg.dir, "data") }

// running reports whether the server's process is running.
func (pg *Postgres) Running() bool { return pg.proc != nil && !pg.proc.exited() }

// Stop sends sig (SIGINT is PostgreSQL's fast shutdown, as pg_ctl stop -m
// fast; SIGKILL a crash, which the next start recovers from) and waits up
// to grace for the server and its backends to exit (see proc.Stop). It
// does nothing if the server is not running.
func (pg *Postgres) Stop(sig syscall.Signal, grace time.Duration) error {
	if !pg.Running() {
		return nil
	}
	return pg.proc.Stop(sig, grace)
}

// Restart starts a stopped server again on the same port and data, and
// waits until it accepts connections. StartPostgres starts it this way
// too.
func (pg *Postgres) Restart(ctx context.Context) error {
	if pg.Running() {
		return fmt.Errorf("postgres at %s: restart while running", pg.URL())
	}
	logPath := filepath.Join(pg.dir, fmt.Sprintf("postgres-%d.log", pg.port))
	cmd := exec.Command(filepath.Join(pg.bin, "postgres"), "-D", pg.data(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(pg.port),
		"-c", "unix_socket_directories="+pg.dir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
	)
	for _, kv := range pg.settings {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
	cmd.Dir = pg.dir
	cmd.Env = pgEnv(pg.dir)
	p, err := startProc("postgres", logPath, cmd, pg.cred, true)
	if err != nil {
		return err
	}
	pg.proc = p
	if err := waitPostgres(ctx, p, pg.URL()); err != nil {
		_ = p.Stop(syscall.SIGINT, 5*time.Second)
		return err
	}
	return nil
}

// waitPostgres polls until the server answers a query, it exits, or ctx
// ends.
func waitPostgres(ctx context.Context, p *proc, url string) error {
	for {
		if p.exited() {
			return p.exitError()
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, url)
		if err == nil {
			err = conn.Ping(cctx)
			_ = conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections at %s: %v (last error: %v)\n%s",
				url, ctx.Err(), err, LogTail(p.LogPath()))
		case <-p.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// FindPostgres returns the directory that holds initdb and postgres: the
// one of the initdb in PATH, else the newest /usr/lib/postgresql/*/bin
// (Debian's packages put nothing in PATH).
func FindPostgres() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL not found: no initdb in PATH or /usr/lib/postgresql/*/bin " +
		"(Debian: apt-get install postgresql)")
}

func pgVersion(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// postgresCredential returns the user to run PostgreSQL as: nil (ourselves)
// unless we are root, which PostgreSQL refuses. Then it is "postgres", or a
// system user created for the purpose.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		u, err = user.Lookup(pgFallbackUser)
	}
	if err != nil {
		out, cerr := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", pgFallbackUser).CombinedOutput()
		if cerr != nil {
			return nil, fmt.Errorf("running as root and no user \"postgres\" to run PostgreSQL as; useradd %s: %v: %s",
				pgFallbackUser, cerr, strings.TrimSpace(string(out)))
		}
		if u, err = user.Lookup(pgFallbackUser); err != nil {
			return nil, fmt.Errorf("look up user %s after useradd: %w", pgFallbackUser, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %s has non-numeric uid/gid %q/%q", u.Username, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// pgEnv is the environment for initdb and postgres: ours without PG*
// variables, which could point them at another cluster.
func pgEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "LC_ALL=C")
}
