package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/snowkeyhq/snowkey/internal/testenv"
	"github.com/snowkeyhq/snowkey/internal/testenv/redisctl"
)

// need skips the test (fails it in CI) when err says a binary is missing.
func need(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if testenv.InCI() {
		t.Fatal(err)
	}
	t.Skip(err)
}

// sessionDir makes a directory as testservers does, removed after the test.
func sessionDir(t *testing.T) string {
	t.Helper()
	dir, err := makeTempDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestStartPostgres(t *testing.T) {
	t.Parallel()
	_, err := findPostgresBin()
	need(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, url, err := startPostgres(ctx, filepath.Join(sessionDir(t), "pg"), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.stop(syscall.SIGINT, 15*time.Second); err != nil {
			t.Error(err)
		}
	}()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var maxConns, fsync, listen string
	err = conn.QueryRow(ctx, "SELECT current_setting('max_connections'), current_setting('fsync'), "+
		"current_setting('listen_addresses')").Scan(&maxConns, &fsync, &listen)
	if err != nil {
		t.Fatal(err)
	}
	if maxConns != "200" || fsync != "off" || listen != "127.0.0.1" {
		t.Errorf("max_connections=%s fsync=%s listen_addresses=%s; want 200, off, 127.0.0.1", maxConns, fsync, listen)
	}
}

func TestStartRedisAndCluster(t *testing.T) {
	t.Parallel()
	server, cli, err := findRedis()
	need(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := sessionDir(t)

	p, addr, err := startRedis(ctx, server, filepath.Join(dir, "redis"), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if reply, err := redisctl.Do(ctx, addr, "SET", "k", "v"); err != nil || reply != "OK" {
		t.Errorf("SET: %q, %v", reply, err)
	}
	if reply, err := redisctl.Do(ctx, addr, "GET", "k"); err != nil || reply != "v" {
		t.Errorf("GET: %q, %v", reply, err)
	}
	if err := p.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Error(err)
	}
	if !p.exited() {
		t.Error("redis-server still running after stop")
	}

	procs, addrs, err := startCluster(ctx, server, cli, filepath.Join(dir, "cluster"), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range procs {
			_ = p.stop(syscall.SIGTERM, 10*time.Second)
		}
	}()
	if len(addrs) != clusterSize {
		t.Fatalf("%d cluster nodes, want %d", len(addrs), clusterSize)
	}
	for _, a := range addrs {
		port, _ := strconv.Atoi(a[strings.LastIndexByte(a, ':')+1:])
		if port+10000 > 65535 {
			t.Errorf("node %s: bus port %d out of range", a, port+10000)
		}
		info, err := redisctl.Do(ctx, a, "CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Errorf("CLUSTER INFO on %s: %q, %v", a, info, err)
		}
	}
}

func TestRemoveStale(t *testing.T) {
	base := t.TempDir()
	mk := func(name, pid string) string {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if pid != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(pid), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	live := mk(tempPrefix+"live", strconv.Itoa(os.Getpid()))
	dead := mk(tempPrefix+"dead", "2147483646") // above any pid_max
	noPid := mk(tempPrefix+"nopid", "")
	other := mk("other", "2147483646")
	removeStale(base)
	for dir, want := range map[string]bool{live: true, dead: false, noPid: true, other: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}

func TestExitStatus(t *testing.T) {
	tests := []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"kill -TERM $$", 128 + int(syscall.SIGTERM)},
	}
	for _, tt := range tests {
		cmd := exec.Command("sh", "-c", tt.script)
		_ = cmd.Run()
		if got := exitStatus(cmd.ProcessState); got != tt.want {
			t.Errorf("%q: exit status %d, want %d", tt.script, got, tt.want)
		}
	}
}

func TestTraversable(t *testing.T) {
	dir := t.TempDir()
	closed := filepath.Join(dir, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(closed, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if traversable(open) {
		t.Errorf("%s reported traversable under a 0700 directory", open)
	}
	if !traversable("/") {
		t.Error("/ reported not traversable")
	}
}
