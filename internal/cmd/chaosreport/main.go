// Command chaosreport prints the table of a chaos run from the rows that
// the chaos tests appended (chaos.Scenario.Run, one JSON line per row, in
// the file named by CHAOS_REPORT), and says whether the run kept snowkey's
// promises.
//
// Usage:
//
//	chaosreport [report.jsonl …]
//
// It reads the files named, or standard input, adds up the rows of each
// package, fault kind, store and defence, and prints one Markdown table
// with, for each side (defence on, control), the runs, how many met their
// fault and how many missed it, and the violations found, then the IDs,
// tokens and table rows the checks covered. It exits 1 when a row breaks
// the rules of chaos.Row.Problems: a violation with the defence on; no
// control run that met the fault and found a violation; fewer defended
// runs that met the fault than the control needed. It exits 2 when the
// input cannot be read or holds no rows; else 0.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
)

// Exit statuses.
const (
	exitOK     = 0
	exitBroken = 1
	exitInput  = 2
)

// errNoRows says the input held nothing to report.
var errNoRows = errors.New("no rows: did the chaos tests run (chaos.Scenario)?")

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: chaosreport [report.jsonl ...]")
		return exitInput
	}
	var rows []chaos.Row
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
func readRows(name string, r io.Reader) ([]chaos.Row, error) {
	var rows []chaos.Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var row chaos.Row
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

// sum adds up the rows of each package, fault kind, store (with the
// server it ran on) and defence (several runs of the suite), sorted by
// them. Rows of different stores, servers or defences are never added:
// each control stands for its own.
func sum(rows []chaos.Row) []chaos.Row {
	type key struct{ pkg, fault, store, defence string }
	byKey := map[key]*chaos.Row{}
	var keys []key
	for _, r := range rows {
		k := key{r.Package, r.Fault, r.StoreName(), r.Defence}
		t, ok := byKey[k]
		if !ok {
			t = &chaos.Row{Package: r.Package, Fault: r.Fault, Store: r.Store, Server: r.Server, Defence: r.Defence, Seed: r.Seed}
			byKey[k] = t
			keys = append(keys, k)
		}
		t.Runs += r.Runs
		t.Met += r.Met
		t.Rows += r.Rows
		t.Violations += r.Violations
		t.ControlRuns += r.ControlRuns
		t.ControlMet += r.ControlMet
		t.ControlViolations += r.ControlViolations
		t.ControlNeeded += r.ControlNeeded
		t.IDs += r.IDs
		t.Tokens += r.Tokens
		t.Seconds += r.Seconds
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(a.pkg, b.pkg), strings.Compare(a.fault, b.fault),
			strings.Compare(a.store, b.store), strings.Compare(a.defence, b.defence))
	})
	out := make([]chaos.Row, len(keys))
	for i, k := range keys {
		out[i] = *byKey[k]
	}
	return out
}

// orDash returns s, or "—" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// write prints the table and returns what is wrong, one line per problem.
func write(w io.Writer, rows []chaos.Row) []string {
	fmt.Fprintln(w, "| package | fault kind | store | defence | runs | met | missed | violations | "+
		"control runs | met | missed | control violations | IDs checked | tokens checked | rows checked | seconds | verdict |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	var broken []string
	var total chaos.Row
	bad := 0
	for _, r := range rows {
		problems := r.Problems()
		mark := "ok"
		if len(problems) > 0 {
			bad++
			mark = "**" + strings.Join(problems, "; ") + "**"
			for _, p := range problems {
				broken = append(broken, fmt.Sprintf("%s / %s [%s, %s]: %s (first seed %d)",
					r.Package, r.Fault, orDash(r.StoreName()), orDash(r.Defence), p, r.Seed))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.0f | %s |\n",
			r.Package, r.Fault, orDash(r.StoreName()), orDash(r.Defence),
			r.Runs, r.Met, r.Runs-r.Met, r.Violations,
			r.ControlRuns, r.ControlMet, r.ControlRuns-r.ControlMet, r.ControlViolations,
			r.IDs, r.Tokens, r.Rows, r.Seconds, mark)
		total.Runs += r.Runs
		total.Met += r.Met
		total.ControlRuns += r.ControlRuns
		total.ControlMet += r.ControlMet
		total.IDs += r.IDs
		total.Tokens += r.Tokens
		total.Rows += r.Rows
	}
	// The totals add runs and what was checked; violations are judged
	// row by row only.
	fmt.Fprintf(w, "| **all** | %d rows, %d broken | | | %d | %d | %d | | %d | %d | %d | | %d | %d | %d | | |\n",
		len(rows), bad, total.Runs, total.Met, total.Runs-total.Met,
		total.ControlRuns, total.ControlMet, total.ControlRuns-total.ControlMet, total.IDs, total.Tokens, total.Rows)
	return broken
}
