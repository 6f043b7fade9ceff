package benchratio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// errSpec is wrapped by every error about a malformed spec line.
var errSpec = errors.New("bad ratio spec")

var nan = math.NaN()

// transforms maps the transform names a spec may give after the metric to
// what they do to each sample.
var transforms = map[string]struct {
	apply func(float64) float64
	unit  func(string) string
}{
	"per-second": {
		apply: func(ns float64) float64 { return 1e9 / ns },
		unit: func(u string) string {
			if per, ok := strings.CutPrefix(u, "ns/"); ok {
				return per + "/s" // ns/op -> op/s
			}
			return "1e9/(" + u + ")"
		},
	},
	"inverse": {
		apply: func(x float64) float64 { return 1 / x },
		unit:  func(u string) string { return "1/(" + u + ")" },
	},
}

// Ratio is one line of a spec: Numerator / Denominator in Metric.
type Ratio struct {
	// Line is the line number in the spec, for messages.
	Line int
	// Name labels the ratio in the report.
	Name string
	// Numerator names a benchmark (see Results.Find).
	Numerator string
	// Denominator names a benchmark; it is "" when Constant is used.
	Denominator string
	// Constant is the denominator when Denominator is "", in the metric's
	// unit after the transform.
	Constant float64
	// Metric is the unit whose values are compared, such as ns/op.
	Metric string
	// Transform is "", "per-second" or "inverse".
	Transform string
	// goal is what the ratio should meet; its zero value is no goal.
	Goal goal
}

// unit returns the unit of the compared values, after the transform.
func (r Ratio) unit() string {
	if t, ok := transforms[r.Transform]; ok {
		return t.unit(r.Metric)
	}
	return r.Metric
}

// goal is a bound on a ratio, such as ">= 0.99". The zero Goal is no goal.
type goal struct {
	// Op is ">=", ">", "<=", "<", or "" for no goal.
	Op string
	// Value is the bound the ratio is compared with.
	Value float64
}

// Met reports whether ratio meets the goal; it is true for no goal and
// false for NaN.
func (g goal) Met(ratio float64) bool {
	switch g.Op {
	case ">=":
		return ratio >= g.Value
	case ">":
		return ratio > g.Value
	case "<=":
		return ratio <= g.Value
	case "<":
		return ratio < g.Value
	}
	return true
}

// String returns the goal as written in a spec, or "-" for none.
func (g goal) String() string {
	if g.Op == "" {
		return "-"
	}
	return g.Op + " " + strconv.FormatFloat(g.Value, 'g', -1, 64)
}

// parseGoal parses ">= 0.99", "<0.8" and the like; "" and "-" are no goal.
func parseGoal(s string) (goal, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "-" {
		return goal{}, nil
	}
	for _, op := range []string{">=", "<=", ">", "<"} { // two-byte ops first
		if rest, ok := strings.CutPrefix(s, op); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil || math.IsNaN(v) {
				return goal{}, fmt.Errorf("%w: goal %q: %q is not a number", errSpec, s, strings.TrimSpace(rest))
			}
			return goal{Op: op, Value: v}, nil
		}
	}
	return goal{}, fmt.Errorf("%w: goal %q: want >=, >, <= or < and a number", errSpec, s)
}

// ParseSpec reads a spec (see the package documentation). It reports every
// malformed line, each error wrapping ErrSpec.
func ParseSpec(r io.Reader) ([]Ratio, error) {
	var ratios []Ratio
	var errs []error
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ratio, err := parseSpecLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		ratio.Line = n
		ratios = append(ratios, ratio)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	return ratios, errors.Join(errs...)
}

func parseSpecLine(line string) (Ratio, error) {
	f := strings.Split(line, "|")
	if len(f) != 5 {
		return Ratio{}, fmt.Errorf("%w: %d fields, want 5: name | numerator | denominator | metric | goal",
			errSpec, len(f))
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	r := Ratio{Name: f[0], Numerator: f[1]}
	if r.Name == "" || r.Numerator == "" || f[2] == "" || f[3] == "" {
		return Ratio{}, fmt.Errorf("%w: name, numerator, denominator and metric must not be empty", errSpec)
	}
	if !isBenchRef(r.Numerator) {
		return Ratio{}, fmt.Errorf("%w: numerator %q is not a benchmark name (Benchmark… or pkg.Benchmark…)",
			errSpec, r.Numerator)
	}
	if c, err := strconv.ParseFloat(f[2], 64); err == nil {
		if c == 0 || math.IsNaN(c) || math.IsInf(c, 0) {
			return Ratio{}, fmt.Errorf("%w: constant denominator %q must be a finite non-zero number", errSpec, f[2])
		}
		r.Constant = c
	} else if isBenchRef(f[2]) {
		r.Denominator = f[2]
	} else {
		return Ratio{}, fmt.Errorf("%w: denominator %q is neither a benchmark name nor a number", errSpec, f[2])
	}
	metric := strings.Fields(f[3])
	r.Metric = metric[0]
	switch len(metric) {
	case 1:
	case 2:
		if _, ok := transforms[metric[1]]; !ok {
			return Ratio{}, fmt.Errorf("%w: unknown transform %q (want per-second or inverse)", errSpec, metric[1])
		}
		r.Transform = metric[1]
	default:
		return Ratio{}, fmt.Errorf("%w: metric %q: want a unit and at most one transform", errSpec, f[3])
	}
	g, err := parseGoal(f[4])
	if err != nil {
		return Ratio{}, err
	}
	r.Goal = g
	return r, nil
}

func isBenchRef(s string) bool {
	return !strings.ContainsAny(s, " \t") &&
		(strings.HasPrefix(s, "Benchmark") || strings.Contains(s, ".Benchmark"))
}
