// Command chaosreport prints the table of a chaos run from the rows that
// the chaos tests appended (faults.Report, one JSON line per row, in the
// file named by CHAOS_REPORT), and says whether the run kept snowkey's
// promises.
//
// Usage:
//
//	chaosreport [report.jsonl …]
//
// It reads the files named, or standard input, adds up the rows of each
// package and fault kind, and prints one Markdown table: fault kind ×
// runs × IDs checked × tokens checked × rows checked × violations ×
// control runs × control violations. It exits 1 when any fault kind had a violation with
// the defence on, or no control run, or control runs that found no
// violation (the scenario did not reach its fault); 2 when the input
// cannot be read or holds no rows; else 0.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/snowkeyhq/snowkey/internal/faults"
)

// Exit statuses.
const (
	exitOK     = 0
	exitBroken = 1
	exitInput  = 2
)

// errNoRows says the input held nothing to report.
var errNoRows = errors.New("no rows: did the chaos tests run and call faults.Report?")

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: chaosreport [report.jsonl ...]")
		return exitInput
	}
	var rows []faults.Row
	if len(args) == 0 {
		r, err := readRows("standard input", stdin)
		if err != nil {
			fmt.Fprintln(stderr, "chaosreport:", err)
			return exitInput
		}
		rows = r
	}
	for _, path := range args {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(stderr, "chaosreport:", err)
			return exitInput
		}
		r, err := readRows(path, f)
		f.Close()
		if err != nil {
			fmt.Fprintln(stderr, "chaosreport:", err)
			return exitInput
		}
		rows = append(rows, r...)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stderr, "chaosreport:", errNoRows)
		return exitInput
	}
	table := sum(rows)
	broken := write(stdout, table)
	if len(broken) > 0 {
		for _, b := range broken {
			fmt.Fprintln(stderr, "chaosreport:", b)
		}
		return exitBroken
	}
	return exitOK
}

// readRows decodes one row per non-empty line of r.
func readRows(name string, r io.Reader) ([]faults.Row, error) {
	var rows []faults.Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var row faults.Row
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&row); err != nil {
			return nil, fmt.Errorf("%s:%d: not a chaos row: %v", name, n, err)
		}
		if row.Fault == "" {
			return nil, fmt.Errorf("%s:%d: row without a fault kind", name, n)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rows, nil
}

// sum adds up the rows of each package and fault kind, sorted by both.
func sum(rows []faults.Row) []faults.Row {
	type key struct{ pkg, fault string }
	byKey := map[key]*faults.Row{}
	var keys []key
	for _, r := range rows {
		k := key{r.Package, r.Fault}
		t, ok := byKey[k]
		if !ok {
			t = &faults.Row{Package: r.Package, Fault: r.Fault, Seed: r.Seed}
			byKey[k] = t
			keys = append(keys, k)
		}
		t.Runs += r.Runs
		t.IDs += r.IDs
		t.Tokens += r.Tokens
		t.Rows += r.Rows
		t.Violations += r.Violations
		t.ControlRuns += r.ControlRuns
		t.ControlViolations += r.ControlViolations
		t.Seconds += r.Seconds
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.pkg, b.pkg); c != 0 {
			return c
		}
		return strings.Compare(a.fault, b.fault)
	})
	out := make([]faults.Row, len(keys))
	for i, k := range keys {
		out[i] = *byKey[k]
	}
	return out
}

// verdict says what is wrong with a row, or "" if nothing.
func verdict(r faults.Row) string {
	switch {
	case r.Violations > 0:
		return fmt.Sprintf("%d violations with the defence on", r.Violations)
	case r.ControlRuns == 0:
		return "no control run"
	case r.ControlViolations == 0:
		return "control found no violation"
	}
	return ""
}

// write prints the table and returns what is wrong, one line per bad row.
func write(w io.Writer, rows []faults.Row) []string {
	fmt.Fprintln(w, "| package | fault kind | runs | IDs checked | tokens checked | rows checked | violations | control runs | control violations | seconds | verdict |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	var broken []string
	var total faults.Row
	for _, r := range rows {
		v := verdict(r)
		mark := "ok"
		if v != "" {
			mark = "**" + v + "**"
			broken = append(broken, fmt.Sprintf("%s / %s: %s (first seed %d)", r.Package, r.Fault, v, r.Seed))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %.0f | %s |\n", r.Package, r.Fault, r.Runs, r.IDs,
			r.Tokens, r.Rows, r.Violations, r.ControlRuns, r.ControlViolations, r.Seconds, mark)
		total.Runs += r.Runs
		total.IDs += r.IDs
		total.Tokens += r.Tokens
		total.Rows += r.Rows
		total.Violations += r.Violations
		total.ControlRuns += r.ControlRuns
		total.ControlViolations += r.ControlViolations
	}
	fmt.Fprintf(w, "| **all** | %d fault kinds in all | %d | %d | %d | %d | %d | %d | %d | | |\n", len(rows), total.Runs, total.IDs,
		total.Tokens, total.Rows, total.Violations, total.ControlRuns, total.ControlViolations)
	return broken
}
