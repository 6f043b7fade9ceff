package launch_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// need skips the test (fails it in CI) when err says a binary is missing.
func need(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	testenv.Skip(t, err.Error())
}

// redisBinaries returns redis-server and redis-cli, or skips.
func redisBinaries(t *testing.T) (bin, cli string) {
	t.Helper()
	bin, cli, err := launch.FindRedis(os.Getenv(testenv.EnvRedisServer))
	need(t, err)
	return bin, cli
}

func TestStartRedisRestart(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	bin, _ := redisBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := launch.StartRedis(ctx, launch.RedisConfig{Bin: bin, Dir: t.TempDir(), Args: []string{"--appendonly", "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(syscall.SIGKILL, 10*time.Second)
	if reply, err := launch.Do(ctx, r.Addr(), "SET", "k", "v"); err != nil || reply != "OK" {
		t.Fatalf("SET: %q, %v", reply, err)
	}
	if err := r.Restart(ctx); err == nil {
		t.Error("Restart of a running server: no error")
	}
	if err := r.Stop(syscall.SIGTERM, 10*time.Second); err != nil || r.Running() {
		t.Fatalf("Stop: %v, running %v", err, r.Running())
	}
	if _, err := launch.Do(ctx, r.Addr(), "PING"); err == nil {
		t.Fatal("PING answered after Stop")
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if reply, err := launch.Do(ctx, r.Addr(), "GET", "k"); err != nil || reply != "v" {
		t.Errorf("GET after a restart with appendonly: %q, %v; want v", reply, err)
	}
}

func TestStartRedisExitsAtStartup(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	bin, _ := redisBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := launch.StartRedis(ctx, launch.RedisConfig{Bin: bin, Dir: t.TempDir(), Args: []string{"--no-such-option", "1"}})
	if err == nil || !strings.Contains(err.Error(), "exited during startup") || !strings.Contains(err.Error(), "no-such-option") {
		t.Errorf("bad option: %v; want an early exit with the log's complaint", err)
	}
}

func TestStartCluster(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 3*time.Minute)
	bin, cli := redisBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	nodes, err := launch.StartCluster(ctx, launch.ClusterConfig{Bin: bin, Cli: cli, Dir: t.TempDir(), Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, n := range nodes {
			_ = n.Stop(syscall.SIGKILL, 10*time.Second)
		}
	}()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes))
	}
	for _, n := range nodes {
		a := n.Addr()
		port, _ := strconv.Atoi(a[strings.LastIndexByte(a, ':')+1:])
		if port+10000 > 65535 {
			t.Errorf("node %s: bus port %d out of range", a, port+10000)
		}
		info, err := launch.Do(ctx, a, "CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
			t.Errorf("CLUSTER INFO on %s: %q, %v", a, info, err)
		}
	}
	if _, err := launch.StartCluster(ctx, launch.ClusterConfig{Bin: bin, Cli: cli, Dir: t.TempDir(), Nodes: 2}); err == nil {
		t.Error("a 2-node cluster: no error")
	}
}

func TestStartPostgres(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 3*time.Minute)
	_, err := launch.FindPostgres()
	need(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir, err := launch.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pg, err := launch.StartPostgres(ctx, filepath.Join(dir, "pg"))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop(syscall.SIGKILL, 10*time.Second)
	query := func(sql string, dest ...any) error {
		conn, err := pgx.Connect(ctx, pg.URL())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.QueryRow(ctx, sql).Scan(dest...)
	}
	run := func(sql string) error {
		conn, err := pgx.Connect(ctx, pg.URL())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	var maxConns, fsync, listen string
	err = query("SELECT current_setting('max_connections'), current_setting('fsync'), "+
		"current_setting('listen_addresses')", &maxConns, &fsync, &listen)
	if err != nil {
		t.Fatal(err)
	}
	if maxConns != "200" || fsync != "off" || listen != "127.0.0.1" {
		t.Errorf("max_connections=%s fsync=%s listen_addresses=%s; want 200, off, 127.0.0.1", maxConns, fsync, listen)
	}
	// With synchronous_commit off a commit may still sit in WAL buffers
	// that a crash loses; CHECKPOINT, after the commit, writes it out.
	for _, sql := range []string{"CREATE TABLE kept AS SELECT 1 AS n", "CHECKPOINT"} {
		if err := run(sql); err != nil {
			t.Fatal(err)
		}
	}
	var one int
	// A crash, then crash recovery on the same port and data.
	if err := pg.Stop(syscall.SIGKILL, 10*time.Second); err != nil || pg.Running() {
		t.Fatalf("kill: %v, running %v", err, pg.Running())
	}
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := query("SELECT n FROM kept", &one); err != nil || one != 1 {
		t.Errorf("after kill and restart: %d, %v; want the table back", one, err)
	}
	if err := pg.Stop(syscall.SIGINT, 30*time.Second); err != nil || pg.Running() {
		t.Errorf("fast shutdown: %v, running %v", err, pg.Running())
	}
}
