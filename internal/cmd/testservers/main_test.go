package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestSession starts every server as testservers does, checks the
// environment it would pass on, and that cleanup stops the servers and
// removes the directory.
func TestSession(t *testing.T) {
	testenv.Deadline(t, 3*time.Minute)
	if _, err := launch.FindPostgres(); err != nil {
		testenv.Skip(t, err.Error())
	}
	for _, v := range []string{testenv.EnvPostgres, testenv.EnvRedis, testenv.EnvRedisCluster, testenv.EnvRedisServer} {
		t.Setenv(v, "")
		os.Unsetenv(v) // set to "" by t.Setenv, which restores it afterwards
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := &session{logf: t.Logf}
	cleaned := false
	defer func() {
		if !cleaned {
			s.cleanup()
		}
	}()
	if err := s.start(ctx, options{postgres: true, redis: true, cluster: true}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	conn, err := pgx.Connect(ctx, env[testenv.EnvPostgres])
	if err != nil {
		t.Fatalf("%s=%q: %v", testenv.EnvPostgres, env[testenv.EnvPostgres], err)
	}
	conn.Close(ctx)
	if reply, err := launch.Do(ctx, env[testenv.EnvRedis], "PING"); err != nil || reply != "PONG" {
		t.Errorf("%s=%q: PING %q, %v", testenv.EnvRedis, env[testenv.EnvRedis], reply, err)
	}
	cluster := strings.Split(env[testenv.EnvRedisCluster], ",")
	if len(cluster) != clusterSize {
		t.Errorf("%s=%q: want %d nodes", testenv.EnvRedisCluster, env[testenv.EnvRedisCluster], clusterSize)
	}
	for _, a := range cluster {
		if info, err := launch.Do(ctx, a, "CLUSTER", "INFO"); err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Errorf("CLUSTER INFO on %s: %q, %v", a, info, err)
		}
	}
	if _, err := os.Stat(env[testenv.EnvRedisServer]); err != nil {
		t.Errorf("%s=%q: %v", testenv.EnvRedisServer, env[testenv.EnvRedisServer], err)
	}
	if len(s.servers) != 2+clusterSize {
		t.Errorf("%d servers to stop, want %d", len(s.servers), 2+clusterSize)
	}

	s.cleanup()
	cleaned = true
	for _, a := range append(cluster, env[testenv.EnvRedis]) {
		if _, err := launch.Do(ctx, a, "PING"); err == nil {
			t.Errorf("%s still answers after cleanup", a)
		}
	}
	// Another test's server may have the port by now (seen under
	// stress-ng --cpu 8 with go test -p 8): only this session's own
	// server, whose data directory is under s.dir, counts.
	if c, err := pgx.Connect(ctx, env[testenv.EnvPostgres]); err == nil {
		var dir string
		err := c.QueryRow(ctx, "SHOW data_directory").Scan(&dir)
		c.Close(ctx)
		if err != nil || strings.HasPrefix(dir, s.dir) {
			t.Errorf("postgres still accepts connections after cleanup (data directory %q, %v)", dir, err)
		}
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("session directory %s after cleanup: %v", s.dir, err)
	}
}

func TestExitStatus(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
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

// TestMain bounds the package's tests as a whole (testenv.Main): several
// times their usual time on a busy machine.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 3*time.Minute))
}
