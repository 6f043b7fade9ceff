package readmecheck_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snowkeyhq/snowkey/internal/checks/readmecheck"
)

// TestLinks finds no broken link in the README, the changelog, the
// benchmarks and the guides: every relative link names a file or
// directory of the checkout, and every #fragment a heading of the page.
func TestLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "CHANGELOG.md"),
		filepath.Join(repoRoot, "BENCHMARKS.md"), filepath.Join(repoRoot, "examples", "server", "README.md"))
	for _, f := range files {
		broken, err := readmecheck.BrokenLinks(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			t.Error(b)
		}
	}
}

// TestBrokenLinks is TestLinks' control: testdata/links/links.md holds
// links that lead nowhere, each of which must be reported, beside links
// that must not be (headings with punctuation and repeats, a directory,
// another site, code).
func TestBrokenLinks(t *testing.T) {
	got, err := readmecheck.BrokenLinks("testdata/links/links.md")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"links.md:14: missing.md:",
		"links.md:15: #nowhere:",
		"links.md:15: other.md#links:",
		"links.md:16: .#x:",
		"links.md:16: #repeated-2:",
		"links.md:24: missing-too.md:",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
			t.Errorf("BrokenLinks did not report %q; it reported:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("BrokenLinks reported %d links, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}
