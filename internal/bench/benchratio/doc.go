// Package benchratio turns `go test -bench` output into the ratios that
// snowkey's issues set goals for, such as "ID generation runs at 99% of
// the 41/10/12 layout's ceiling of 4,096 IDs per ms" or "the GORM plugin
// adds at most 10% to an insert".
//
// Parse reads benchmark output (any number of packages, -count N, custom
// metrics from b.ReportMetric); each benchmark's value of a metric is the
// median over its runs. ParseSpec reads a spec, one ratio a line:
//
//	# name | numerator | denominator | metric | goal
//	next-vs-ceiling | idtype.BenchmarkNext | 4096000 | ns/op per-second | >= 0.99
//	plugin-overhead | BenchmarkCreate/plugin | BenchmarkCreate/plain | ns/op | <= 1.10
//	batch-allocs    | BenchmarkNextN/1000 | BenchmarkNext | allocs/op | <= 1
//
// Fields are separated by '|'; blank lines and lines starting with '#' are
// skipped.
//
//   - name: what the ratio is called in the report.
//   - numerator: a benchmark's full name with its sub-benchmarks, without the
//     "-8" GOMAXPROCS suffix, e.g. BenchmarkCreate/batch=100. When the same
//     name exists in several packages, put the package path (or its last
//     elements) before it: snowkey/idtype.BenchmarkNext.
//   - denominator: another benchmark, or a constant number, which is taken
//     as already being in the metric's unit (after the transform).
//   - metric: the unit as the output prints it (ns/op, B/op, allocs/op, MB/s
//     or a custom unit), optionally followed by a transform: "per-second"
//     turns a time per op in ns into ops per second (1e9/x), "inverse" takes
//     1/x. The transform is applied to every run before the median is taken.
//   - goal: ">= X", "> X", "<= X" or "< X" for the ratio; empty or "-" for
//     none.
//
// Report writes the results as a Markdown table. Benchmarks measure; they do
// not decide: an unmet goal or a missing benchmark shows in the table and
// is not an error.
package benchratio
