package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "x.ratios")
	bad := filepath.Join(dir, "bad.ratios")
	out := filepath.Join(dir, "raw.txt")
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(spec, "speed | BenchmarkA | BenchmarkB | ns/op | <= 0.5\n")
	write(bad, "speed | BenchmarkA\n")
	write(out, "BenchmarkA-2 10 100 ns/op") // no final newline
	bOut := "BenchmarkB-2 10 400 ns/op\n"

	tests := []struct {
		name    string
		args    []string
		stdin   string
		wantErr string
		wantOut []string
	}{
		{"files", []string{"-spec", spec, out, out}, "", "", []string{"### " + spec, "| speed | 100 ns/op (n=2) | missing |"}},
		{"stdin", []string{"-spec", spec}, "BenchmarkA 1 100 ns/op\n" + bOut, "", []string{"| 0.25 | <= 0.5 | yes |"}},
		{"two specs", []string{"-spec", spec, "-spec", spec}, bOut, "", []string{"### " + spec + "\n\n", "\n\n### " + spec}},
		{"no spec", nil, "", "no -spec", nil},
		{"bad spec", []string{"-spec", bad}, "", "bad ratio spec", nil},
		{"missing file", []string{"-spec", spec, filepath.Join(dir, "nope")}, "", "no such file", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout strings.Builder
			err := run(tt.args, strings.NewReader(tt.stdin), &stdout)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// TestMain bounds the package's tests as a whole (testenv.Main): several
// times their usual time on a busy machine.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 2*time.Minute))
}
