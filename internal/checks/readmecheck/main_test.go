package readmecheck_test

import (
	"os"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestMain bounds the package's tests as a whole (testenv.Main): longer
// than TestReadme's own Deadline.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 12*time.Minute))
}
