package idtype

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"testing"
	"time"
)

// packageBudget bounds the package's tests as a whole: many times their
// usual few seconds under -race, so that only a hang reaches it.
const packageBudget = 5 * time.Minute

// TestMain ends the test binary, with every goroutine's stack, if the
// package's tests have not ended within packageBudget; benchmarks and
// fuzzing run as long as they are asked to, under go test's -timeout.
// It does for the package what watchdog does for one test, on the
// standard library alone for the same reason.
func TestMain(m *testing.M) {
	flag.Parse()
	for _, name := range []string{"test.bench", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			os.Exit(m.Run())
		}
	}
	timer := time.AfterFunc(packageBudget, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("the package's tests did not end within %v", packageBudget))
	})
	code := m.Run()
	timer.Stop()
	os.Exit(code)
}
