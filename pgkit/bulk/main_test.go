package bulk

import (
	"os"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestMain runs the tests under testenv.Main's budget, and benchmarks
// (which run as long as they are asked to, minutes at the sizes of make
// bench) under go test's -timeout alone.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 6*time.Minute))
}
