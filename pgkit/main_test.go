package pgkit

import (
	"os"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 8*time.Minute))
}
