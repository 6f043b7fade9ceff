package helper

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	Main(map[string]func() int{
		// sleeper says "ready" on stdout, then waits for stdin to close.
		"sleeper": func() int {
			fmt.Println("ready")
			_, _ = io.Copy(io.Discard, os.Stdin)
			fmt.Fprintln(os.Stderr, "stdin closed:", os.Getenv("SLEEPER_NOTE"))
			return 0
		},
		"exit3": func() int {
			fmt.Fprintln(os.Stderr, "failing on purpose")
			return 3
		},
	})
	os.Exit(testenv.Main(m, 3*time.Minute))
}
