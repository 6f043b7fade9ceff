package launch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testenv"
	"github.com/snowkeyhq/snowkey/internal/testenv/launch"
)

func TestDoAndInfo(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	addr := testenv.StartRedis(t).Addr()
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
