package benchratio

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Row is one evaluated ratio.
type Row struct {
	Ratio Ratio
	// Num and Den are the medians of the numerator and the denominator (Den
	// is the constant for a constant denominator); NaN when unknown.
	Num, Den float64
	// NumRuns and DenRuns count the samples behind each median; DenRuns is 0
	// for a constant.
	NumRuns, DenRuns int
	// Value is Num / Den, NaN when unknown.
	Value float64
	// Err says why the row has no value: a missing or ambiguous benchmark,
	// or a metric the benchmark did not report.
	Err error
}

// Met reports whether the row has a value that meets its goal.
func (r Row) Met() bool {
	return r.Err == nil && !math.IsNaN(r.Value) && r.Ratio.Goal.Met(r.Value)
}

// Evaluate computes every ratio from res. A ratio that cannot be computed
// gets a row with Err set; it does not stop the others.
func Evaluate(res *Results, ratios []Ratio) []Row {
	rows := make([]Row, 0, len(ratios))
	for _, ratio := range ratios {
		row := Row{Ratio: ratio, Num: nan, Den: nan, Value: nan}
		row.Num, row.NumRuns, row.Err = median(res, ratio, ratio.Numerator)
		if ratio.Denominator == "" {
			row.Den = ratio.Constant
		} else {
			var err error
			row.Den, row.DenRuns, err = median(res, ratio, ratio.Denominator)
			if row.Err == nil {
				row.Err = err
			}
		}
		if row.Err == nil {
			row.Value = row.Num / row.Den
		}
		rows = append(rows, row)
	}
	return rows
}

// median returns the median of the ratio's metric for the benchmark ref,
// transformed, and the number of runs.
func median(res *Results, ratio Ratio, ref string) (float64, int, error) {
	b, err := res.Find(ref)
	if err != nil {
		return nan, 0, err
	}
	xs, ok := b.Samples[ratio.Metric]
	if !ok {
		return nan, 0, fmt.Errorf("%s reported no %s (it has %s)", ref, ratio.Metric, strings.Join(b.units(), ", "))
	}
	if t, ok := transforms[ratio.Transform]; ok {
		ys := make([]float64, len(xs))
		for i, x := range xs {
			ys[i] = t.apply(x)
		}
		xs = ys
	}
	return Median(xs), len(xs), nil
}

// WriteTable writes rows as a Markdown table with the columns ratio,
// numerator, denominator, value, goal and met ("yes", "no", "-" without a
// goal, "n/a" without a value). Rows with an error list it under the table.
func WriteTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| ratio | numerator | denominator | value | goal | met |\n")
	b.WriteString("| --- | ---: | ---: | ---: | --- | --- |\n")
	var notes []string
	for _, r := range rows {
		unit := r.Ratio.unit()
		num := cell(r.Num, r.NumRuns, unit)
		den := cell(r.Den, r.DenRuns, unit)
		if r.Ratio.Denominator == "" {
			den = formatNumber(r.Den) + " " + unit + " (constant)"
		}
		value, met := "-", "n/a"
		if r.Err == nil && !math.IsNaN(r.Value) {
			value = formatNumber(r.Value)
			switch {
			case r.Ratio.Goal.Op == "":
				met = "-"
			case r.Met():
				met = "yes"
			default:
				met = "no"
			}
		}
		if r.Err != nil {
			notes = append(notes, fmt.Sprintf("- %s (line %d): %v", r.Ratio.Name, r.Ratio.Line, r.Err))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n",
			escape(r.Ratio.Name), num, den, value, escape(r.Ratio.Goal.String()), met)
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cell(v float64, runs int, unit string) string {
	if math.IsNaN(v) {
		return "missing"
	}
	return fmt.Sprintf("%s %s (n=%d)", formatNumber(v), unit, runs)
}

// formatNumber prints four significant digits, and whole numbers of 10,000
// and more in full, which reads better than exponents for rates.
func formatNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if math.Abs(v) >= 1e4 && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// escape keeps a '|' from splitting a table cell.
func escape(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
