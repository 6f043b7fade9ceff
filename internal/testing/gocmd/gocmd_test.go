package gocmd_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/gocmd"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 2*time.Minute))
}

// TestFlagsAreTheBinarys checks Flags against what the go command says
// it built this binary with: the flags make test passes (-race, and
// -trimpath through GOFLAGS) must be seen, or every go command a test
// runs compiles its dependencies again.
func TestFlagsAreTheBinarys(t *testing.T) {
	flags := gocmd.Flags()
	if race := slices.Contains(flags, "-race"); race != raceEnabled {
		t.Errorf("Flags() = %q: -race listed %v, the binary built with -race: %v", flags, race, raceEnabled)
	}
	if raceEnabled && flags[0] != "-race" {
		t.Errorf("Flags() = %q: want -race first", flags)
	}
	goflags := gocmd.GOFLAGS("-mod=mod", "-race")
	if !strings.HasPrefix(goflags, "-mod=mod") || strings.Count(goflags, "-race") > 1 {
		t.Errorf("GOFLAGS(-mod=mod, -race) = %q: want -mod=mod first and each flag once", goflags)
	}
	env := gocmd.Env("-mod=mod")
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOFLAGS=") {
			n++
			if kv != "GOFLAGS="+gocmd.GOFLAGS("-mod=mod") {
				t.Errorf("Env: %s, want GOFLAGS=%s", kv, gocmd.GOFLAGS("-mod=mod"))
			}
		}
	}
	if n != 1 {
		t.Errorf("Env sets GOFLAGS %d times, want once", n)
	}
}

// TestBuildFindsTheCache is Flags' purpose: a go build given Env, of a
// package this test binary is built from (gocmd itself), compiles
// nothing (go build -n prints no compile step). Its control, with a build
// cache of its own that is empty, prints one: the check sees a compile.
func TestBuildFindsTheCache(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command: %v", err)
	}
	ctx := testenv.Deadline(t, time.Minute)
	plan := func(env []string) string {
		cmd := exec.CommandContext(ctx, "go", "build", "-n", "github.com/snowkeyhq/snowkey/internal/testing/gocmd")
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go build -n: %v\n%s", err, b)
		}
		return string(b)
	}
	if got := plan(gocmd.Env()); strings.Contains(got, "/compile ") {
		t.Errorf("go build with GOFLAGS=%q compiles gocmd again:\n%s", gocmd.GOFLAGS(), got)
	}
	if got := plan(append(gocmd.Env(), "GOCACHE="+t.TempDir())); !strings.Contains(got, "/compile ") {
		t.Errorf("go build -n with an empty build cache prints no compile step: the check cannot see one:\n%s", got)
	}
}
