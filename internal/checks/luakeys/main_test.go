package luakeys

import (
	"os"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestMain bounds the package's tests as a whole (testenv.Main): several
// times their usual time on a busy machine.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 2*time.Minute))
}
