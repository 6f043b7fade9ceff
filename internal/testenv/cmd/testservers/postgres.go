package main

import (
	"context"
	"errors"
	"fmt"
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

// findPostgresBin returns the directory that holds initdb and postgres: the
// one of the initdb in PATH, else the newest /usr/lib/postgresql/*/bin
// (Debian's packages put nothing in PATH).
func findPostgresBin() (string, error) {
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
		"(Debian: apt-get install postgresql; or run with -postgres=false)")
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

// startPostgres creates a cluster in dir (initdb) and starts it on a free
// loopback port, returning the process and a superuser URL once the server
// accepts connections.
func startPostgres(ctx context.Context, dir string, logf func(string, ...any)) (*proc, string, error) {
	bin, err := findPostgresBin()
	if err != nil {
		return nil, "", err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, "", fmt.Errorf("chown %s for PostgreSQL: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initLog := filepath.Join(dir, "initdb.log")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.Env = pgEnv(dir)
	// On timeout or signal, end initdb's children (postgres in bootstrap
	// mode) too, so that the directory can be removed.
	initdb.Cancel = func() error { return syscall.Kill(-initdb.Process.Pid, syscall.SIGKILL) }
	p, err := startProc("initdb", initLog, initdb, cred)
	if err != nil {
		return nil, "", err
	}
	<-p.done
	if p.err != nil {
		return nil, "", fmt.Errorf("initdb failed (%v)\n%s", p.err, logTail(initLog))
	}
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return nil, "", fmt.Errorf("write pg_hba.conf: %w", err)
	}

	// A port found free can be taken before postgres binds it; try again then.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		logPath := filepath.Join(dir, fmt.Sprintf("postgres-%d.log", port))
		cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "port="+strconv.Itoa(port),
			"-c", "unix_socket_directories="+dir,
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "max_connections=200",
		)
		cmd.Dir = dir
		cmd.Env = pgEnv(dir)
		p, err := startProc("postgres", logPath, cmd, cred)
		if err != nil {
			return nil, "", err
		}
		url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		err = waitPostgres(ctx, p, url)
		if err == nil {
			logf("postgres %s ready (data in %s)", url, data)
			return p, url, nil
		}
		_ = p.stop(syscall.SIGINT, 5*time.Second)
		if attempt < 3 && p.exited() && logContains(logPath, "could not bind") {
			logf("postgres: port %d was taken, trying another", port)
			continue
		}
		return nil, "", err
	}
}

// waitPostgres polls until the server answers a query, it exits, or ctx ends.
func waitPostgres(ctx context.Context, p *proc, url string) error {
	var last error
	for {
		if p.exited() {
			return p.exitErr()
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
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections at %s: %v (last error: %v)\n%s",
				url, ctx.Err(), last, logTail(p.logPath))
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func logContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}
