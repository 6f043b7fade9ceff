package release_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/gocmd"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestReleaseRefuses: scripts/release.sh, applied, refuses a dirty
// working tree, a VERSION that is not semver, one not above the root
// module's last tag, one the CHANGELOG has no section for, and an API
// file that is not what the code exports; each time it says why, and
// it never leaves a commit or a tag behind. The refusals are seen, not
// assumed: the last case passes every earlier check and is stopped by
// the API check alone, naming the line that differs.
func TestReleaseRefuses(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 8*time.Minute)
	tmp := t.TempDir()
	clone := filepath.Join(tmp, "snowkey")
	// gocmd.Env: the script's go commands (its API check) then find
	// in the build cache what this test run compiled.
	env := append(gocmd.Env(),
		"GIT_AUTHOR_NAME=snowkey release test", "GIT_AUTHOR_EMAIL=release@test.invalid",
		"GIT_COMMITTER_NAME=snowkey release test", "GIT_COMMITTER_EMAIL=release@test.invalid",
		"GIT_CONFIG_GLOBAL="+filepath.Join(tmp, "gitconfig"), "APPLY=1")
	run(ctx, t, "", env, "git", "clone", "-q", repoRoot, clone)
	copyWorkingTree(ctx, t, clone, env)
	head := run(ctx, t, clone, env, "git", "rev-parse", "HEAD")
	// A last tag of the root module, above any the repository has.
	run(ctx, t, clone, env, "git", "tag", "v90.0.0")

	refuse := func(version, want string) {
		t.Helper()
		out, err := releaseScript(ctx, clone, env, version)
		if err == nil {
			t.Fatalf("release %s succeeded:\n%s", version, out)
		}
		if !strings.Contains(out, want) {
			t.Fatalf("release %s refused, but without saying %q:\n%s", version, want, out)
		}
		if now := run(ctx, t, clone, env, "git", "rev-parse", "HEAD"); now != head {
			t.Fatalf("release %s refused but moved HEAD", version)
		}
		if tags := run(ctx, t, clone, env, "git", "tag", "--points-at", "HEAD"); strings.TrimSpace(tags) != "v90.0.0" {
			t.Fatalf("release %s refused but left tags %q", version, tags)
		}
	}
	refuse("1.0.0", "is not a semantic version")
	refuse("v1.0", "is not a semantic version")
	refuse("v90.0.0", "is not above the root module's last tag v90.0.0")
	refuse("v89.1.0", "is not above the root module's last tag v90.0.0")
	refuse("v90.0.1-rc.1", `CHANGELOG.md has no line "## [90.0.1-rc.1] - Unreleased"`)

	writeFile(t, clone, "stray.txt", "not committed\n")
	refuse("v90.1.0", "the working tree has changes or untracked files")
	if err := os.Remove(filepath.Join(clone, "stray.txt")); err != nil {
		t.Fatal(err)
	}

	// A section for the version, and an API file that lacks a line the
	// code exports.
	log, err := os.ReadFile(filepath.Join(clone, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(log), "\n## [", "\n## [90.1.0] - Unreleased\n\n- A test release.\n\n## [", 1)
	writeFile(t, clone, "CHANGELOG.md", text)
	api, err := os.ReadFile(filepath.Join(clone, "api", "snowkey.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(api), "\n")
	dropped := strings.TrimSuffix(lines[0], "\n")
	writeFile(t, clone, filepath.Join("api", "snowkey.txt"), strings.Join(lines[1:], ""))
	run(ctx, t, clone, env, "git", "commit", "-q", "-a", "-m", "an API file one line short")
	head = run(ctx, t, clone, env, "git", "rev-parse", "HEAD")
	run(ctx, t, clone, env, "git", "tag", "-d", "v90.0.0")
	run(ctx, t, clone, env, "git", "tag", "v90.0.0", "HEAD")
	refuse("v90.1.0", "+"+dropped)
}

// releaseScript runs scripts/release.sh VERSION in dir and returns its
// output.
func releaseScript(ctx context.Context, dir string, env []string, version string) (string, error) {
	c := exec.CommandContext(ctx, "bash", "scripts/release.sh", version)
	c.Dir = dir
	c.Env = env
	out, err := c.CombinedOutput()
	return string(out), err
}
