package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestMain bounds the whole package: a hang fails with every goroutine's
// stack instead of running into go test's -timeout. The browser and Node
// tests and the server builds make it the slowest package of the example.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(testenv.Main(m, 10*time.Minute))
}

// quietLogger drops go-redis's own log lines: reconnects to servers that
// tests cut or never started on purpose.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
