package tokens

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// quietLogger drops go-redis's own log lines (Sentinel chatter, reconnects
// to servers that tests kill on purpose).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain bounds the package's tests as a whole (testenv.Main): several
// times their usual time on a busy machine, and the chaos schedule on top
// in the long run (chaos.MainBudget).
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(testenv.Main(m, chaos.MainBudget(4*time.Minute)))
}
