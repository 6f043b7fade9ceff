package launch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestDoAndInfo(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	addr := private.StartRedis(t).Addr()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"SET", "k", "a b"}, "OK"},
		{[]string{"GET", "k"}, "a b"},
		{[]string{"INCR", "n"}, "1"},
	} {
		if got, err := launch.Do(ctx, addr, tt.args...); err != nil || got != tt.want {
			t.Errorf("%v: %q, %v; want %q", tt.args, got, err, tt.want)
		}
	}
	if _, err := launch.Do(ctx, addr, "NOSUCHCOMMAND"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("error reply: %v", err)
	}
	if _, err := launch.Do(ctx, addr, "GET", "missing"); err == nil {
		t.Error("nil bulk reply: no error")
	}
	info, err := launch.Info(ctx, addr, "replication")
	if err != nil || info["role"] != "master" {
		t.Errorf("INFO replication: %v, %v", info, err)
	}
}

// TestFindRedisFork: beside a fork's server, the fork's own client is
// found, not redis-cli, so that the two come from one install.
func TestFindRedisFork(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"valkey-server", "valkey-cli", "redis-cli"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	server, cli, err := launch.FindRedis(filepath.Join(dir, "valkey-server"))
	if err != nil || server != filepath.Join(dir, "valkey-server") || cli != filepath.Join(dir, "valkey-cli") {
		t.Errorf("FindRedis = %q, %q, %v; want valkey-cli beside valkey-server", server, cli, err)
	}
	if err := os.Remove(filepath.Join(dir, "valkey-cli")); err != nil {
		t.Fatal(err)
	}
	if _, cli, _ := launch.FindRedis(filepath.Join(dir, "valkey-server")); cli != filepath.Join(dir, "redis-cli") {
		t.Errorf("without valkey-cli: client %q, want the redis-cli beside the server", cli)
	}
}
