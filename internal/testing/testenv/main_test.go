package testenv

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	budget := 3 * time.Minute
	if os.Getenv(hangEnv) == "main" {
		budget = 300 * time.Millisecond // TestDeadline's child: the hang without a Deadline
	}
	os.Exit(Main(m, budget))
}
