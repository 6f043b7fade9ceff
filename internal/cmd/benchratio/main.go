// Command benchratio prints the ratios of a spec file, computed from
// `go test -bench` output, as Markdown tables.
//
// Usage:
//
//	benchratio -spec FILE [-spec FILE …] [bench-output …]
//
// It reads the benchmark output from the files named, or from standard
// input, and prints one table per spec. The spec format is described in
// package internal/bench/benchratio. Unmet goals and missing benchmarks show in
// the tables and still exit 0: benchmarks measure, they do not decide. A
// malformed spec or an unreadable file exits 2.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/snowkeyhq/snowkey/internal/bench/benchratio"
)

// specFlags collects repeated -spec flags.
type specFlags []string

func (s *specFlags) String() string     { return strings.Join(*s, ",") }
func (s *specFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(2)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("benchratio", flag.ContinueOnError)
	var specs specFlags
	fs.Var(&specs, "spec", "ratio spec file (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: benchratio -spec FILE [-spec FILE ...] [bench-output ...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(specs) == 0 {
		fs.Usage()
		return errors.New("no -spec given")
	}

	var input io.Reader = stdin
	if fs.NArg() > 0 {
		var readers []io.Reader
		for _, name := range fs.Args() {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			// A newline between files keeps a last line without one from
			// running into the next file's first line.
			readers = append(readers, f, strings.NewReader("\n"))
		}
		input = io.MultiReader(readers...)
	}
	res, err := benchratio.Parse(input)
	if err != nil {
		return err
	}

	for i, spec := range specs {
		ratios, err := readSpec(spec)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "### %s\n\n", spec)
		if err := benchratio.WriteTable(stdout, benchratio.Evaluate(res, ratios)); err != nil {
			return err
		}
	}
	return nil
}

func readSpec(path string) ([]benchratio.Ratio, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ratios, err := benchratio.ParseSpec(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ratios, nil
}
