package main

import (
	"os"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// TestMain bounds the whole package: a hang fails with every goroutine's
// stack instead of running into go test's -timeout. The browser and Node
// tests and the server builds make it the slowest package of the example.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 10*time.Minute))
}
