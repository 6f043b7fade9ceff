package benchratio

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

const sampleOutput = `goos: linux
goarch: amd64
pkg: github.com/snowkeyhq/snowkey/idtype
cpu: Some CPU @ 2.00GHz
BenchmarkNext-2         	 5000000	       250.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkNext-2         	 5000000	       240.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkNext-2         	 5000000	       260.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkNextN/1000-2   	   10000	    200000 ns/op	         4096000 ids/s	       1 allocs/op
BenchmarkNextN/1000-2   	   10000	    220000 ns/op	         3900000 ids/s	       1 allocs/op
BenchmarkParse/size-64-2	 1000000	        10.5 ns/op
--- BENCH: BenchmarkLogs-2
    bench_test.go:10: some log line
PASS
ok  	github.com/snowkeyhq/snowkey/idtype	12.345s
goos: linux
goarch: amd64
pkg: github.com/snowkeyhq/snowkey/gormplugin
BenchmarkCreate/plain-2 	   20000	     50000 ns/op	    4000 B/op	      50 allocs/op
BenchmarkCreate/plugin-2	   20000	     54000 ns/op	    4100 B/op	      52 allocs/op
BenchmarkNext-2         	 1000000	      1000 ns/op
PASS
ok  	github.com/snowkeyhq/snowkey/gormplugin	3.000s
`

func mustParse(t *testing.T, s string) *Results {
	t.Helper()
	res, err := Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		line    string
		ok      bool
		name    string
		samples map[string]float64
	}{
		{"BenchmarkX-8 \t 100 \t 12.5 ns/op", true, "BenchmarkX-8", map[string]float64{"ns/op": 12.5}},
		{"BenchmarkX/a=b-8  100  12.5 ns/op  3 B/op  1 allocs/op  7.25 ids/op", true, "BenchmarkX/a=b-8",
			map[string]float64{"ns/op": 12.5, "B/op": 3, "allocs/op": 1, "ids/op": 7.25}},
		{"BenchmarkX 100 1e3 ns/op", true, "BenchmarkX", map[string]float64{"ns/op": 1000}},
		{"BenchmarkX-8", false, "", nil},                 // name printed alone before logs
		{"BenchmarkX-8 100 12.5", false, "", nil},        // value without unit
		{"BenchmarkX-8 many 12.5 ns/op", false, "", nil}, // no iteration count
		{"BenchmarkX-8 100 fast ns/op", false, "", nil},
		{"--- BENCH: BenchmarkX-8", false, "", nil},
		{"ok  \tpkg\t1.0s", false, "", nil},
		{"", false, "", nil},
	}
	for _, tt := range tests {
		name, samples, ok := parseLine(tt.line)
		if ok != tt.ok || name != tt.name || len(samples) != len(tt.samples) {
			t.Errorf("parseLine(%q) = %q, %v, %v; want %q, %v, %v", tt.line, name, samples, ok, tt.name, tt.samples, tt.ok)
			continue
		}
		for u, v := range tt.samples {
			if samples[u] != v {
				t.Errorf("parseLine(%q)[%s] = %v, want %v", tt.line, u, samples[u], v)
			}
		}
	}
}

func TestTrimProcs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"BenchmarkX-8", "BenchmarkX"},
		{"BenchmarkX/size-64-8", "BenchmarkX/size-64"},
		{"BenchmarkX", "BenchmarkX"},
		{"BenchmarkX-", "BenchmarkX-"},
		{"BenchmarkX-a8", "BenchmarkX-a8"},
		{"BenchmarkX/a-b", "BenchmarkX/a-b"},
	}
	for _, tt := range tests {
		if got := trimProcs(tt.in); got != tt.want {
			t.Errorf("trimProcs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	res := mustParse(t, sampleOutput)
	if n := len(res.Benchmarks); n != 6 {
		t.Fatalf("%d benchmarks, want 6", n)
	}
	b := res.Benchmarks[0]
	if b.Pkg != "github.com/snowkeyhq/snowkey/idtype" || b.Name != "BenchmarkNext-2" || b.baseName() != "BenchmarkNext" {
		t.Errorf("first benchmark = %s %s", b.Pkg, b.Name)
	}
	if got := b.Samples["ns/op"]; len(got) != 3 || got[0] != 250 || got[2] != 260 {
		t.Errorf("ns/op samples = %v, want [250 240 260]", got)
	}
	if got := strings.Join(b.units(), " "); got != "B/op allocs/op ns/op" {
		t.Errorf("units = %q", got)
	}
}

func TestFind(t *testing.T) {
	res := mustParse(t, sampleOutput)
	tests := []struct {
		ref     string
		wantPkg string // "" for an error
		errHas  string
	}{
		{"BenchmarkNextN/1000", "github.com/snowkeyhq/snowkey/idtype", ""},
		{"BenchmarkNextN/1000-2", "github.com/snowkeyhq/snowkey/idtype", ""},
		{"BenchmarkParse/size-64", "github.com/snowkeyhq/snowkey/idtype", ""},
		{"BenchmarkCreate/plugin", "github.com/snowkeyhq/snowkey/gormplugin", ""},
		{"BenchmarkNext", "", "ambiguous"},
		{"idtype.BenchmarkNext", "github.com/snowkeyhq/snowkey/idtype", ""},
		{"snowkey/gormplugin.BenchmarkNext", "github.com/snowkeyhq/snowkey/gormplugin", ""},
		{"github.com/snowkeyhq/snowkey/idtype.BenchmarkNext", "github.com/snowkeyhq/snowkey/idtype", ""},
		{"type.BenchmarkNext", "", "not found"}, // a package is matched by whole path elements
		{"BenchmarkNextN", "", "not found"},     // sub-benchmarks are not their parent
		{"BenchmarkMissing", "", "not found"},
	}
	for _, tt := range tests {
		b, err := res.Find(tt.ref)
		if tt.wantPkg == "" {
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("Find(%q) = %v, %v; want an error with %q", tt.ref, b, err, tt.errHas)
			}
			continue
		}
		if err != nil || b.Pkg != tt.wantPkg {
			t.Errorf("Find(%q) = %v, %v; want one from %s", tt.ref, b, err, tt.wantPkg)
		}
	}
}

func TestFindCPUList(t *testing.T) {
	// With -cpu 1,2 the same benchmark appears with and without a suffix.
	res := mustParse(t, "BenchmarkX 10 5 ns/op\nBenchmarkX-2 10 3 ns/op\n")
	if b, err := res.Find("BenchmarkX"); err != nil || b.Name != "BenchmarkX" {
		t.Errorf("Find(BenchmarkX) = %v, %v; want the exact name", b, err)
	}
	if b, err := res.Find("BenchmarkX-2"); err != nil || b.Name != "BenchmarkX-2" {
		t.Errorf("Find(BenchmarkX-2) = %v, %v", b, err)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1, 1000, 2, 3, 2}, 2},
		{[]float64{-1, 1}, 0},
	}
	for _, tt := range tests {
		orig := append([]float64(nil), tt.xs...)
		if got := Median(tt.xs); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
		for i := range orig {
			if orig[i] != tt.xs[i] {
				t.Errorf("Median reordered its input: %v", tt.xs)
				break
			}
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

func TestParseGoal(t *testing.T) {
	tests := []struct {
		in      string
		want    goal
		wantErr bool
	}{
		{">= 0.99", goal{">=", 0.99}, false},
		{"<=0.8", goal{"<=", 0.8}, false},
		{"> 1", goal{">", 1}, false},
		{"< 1e3", goal{"<", 1000}, false},
		{"", goal{}, false},
		{"-", goal{}, false},
		{"== 1", goal{}, true},
		{">= fast", goal{}, true},
		{">=", goal{}, true},
		{"0.99", goal{}, true},
		{">= NaN", goal{}, true},
	}
	for _, tt := range tests {
		got, err := parseGoal(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseGoal(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, errSpec) {
			t.Errorf("ParseGoal(%q) error %v does not wrap ErrSpec", tt.in, err)
		}
	}
}

func TestGoalMet(t *testing.T) {
	tests := []struct {
		goal  string
		ratio float64
		want  bool
	}{
		{">= 0.99", 0.99, true},
		{">= 0.99", 0.98, false},
		{"> 1", 1, false},
		{"<= 0.8", 0.8, true},
		{"< 0.8", 0.8, false},
		{"-", 123, true},
		{">= 0.99", math.NaN(), false},
	}
	for _, tt := range tests {
		g, err := parseGoal(tt.goal)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Met(tt.ratio); got != tt.want {
			t.Errorf("%q.Met(%v) = %v, want %v", tt.goal, tt.ratio, got, tt.want)
		}
	}
}

func TestParseSpec(t *testing.T) {
	spec := `# ratios
ceiling | idtype.BenchmarkNext | 4096000 | ns/op per-second | >= 0.99

  overhead|BenchmarkCreate/plugin|BenchmarkCreate/plain|ns/op|<= 1.1
dup #1 | BenchmarkX/case#01 | BenchmarkX/case | allocs/op inverse | -
`
	got, err := ParseSpec(strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	want := []Ratio{
		{Line: 2, Name: "ceiling", Numerator: "idtype.BenchmarkNext", Constant: 4096000, Metric: "ns/op",
			Transform: "per-second", Goal: goal{">=", 0.99}},
		{Line: 4, Name: "overhead", Numerator: "BenchmarkCreate/plugin", Denominator: "BenchmarkCreate/plain",
			Metric: "ns/op", Goal: goal{"<=", 1.1}},
		{Line: 5, Name: "dup #1", Numerator: "BenchmarkX/case#01", Denominator: "BenchmarkX/case",
			Metric: "allocs/op", Transform: "inverse"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d ratios, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ratio %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct{ line, errHas string }{
		{"a | BenchmarkX | BenchmarkY | ns/op", "4 fields"},
		{"a | BenchmarkX | BenchmarkY | ns/op | >= 1 | extra", "6 fields"},
		{" | BenchmarkX | BenchmarkY | ns/op | -", "must not be empty"},
		{"a | BenchmarkX | BenchmarkY |  | -", "must not be empty"},
		{"a | Next | BenchmarkY | ns/op | -", "numerator"},
		{"a | BenchmarkX | fast | ns/op | -", "denominator"},
		{"a | BenchmarkX | 0 | ns/op | -", "non-zero"},
		{"a | BenchmarkX | BenchmarkY | ns/op per-minute | -", "transform"},
		{"a | BenchmarkX | BenchmarkY | ns/op per-second x | -", "at most one transform"},
		{"a | BenchmarkX | BenchmarkY | ns/op | about 1", "goal"},
	}
	for _, tt := range tests {
		_, err := ParseSpec(strings.NewReader("# header\n" + tt.line + "\n"))
		if err == nil || !errors.Is(err, errSpec) || !strings.Contains(err.Error(), tt.errHas) ||
			!strings.Contains(err.Error(), "line 2") {
			t.Errorf("ParseSpec(%q) error = %v; want ErrSpec at line 2 mentioning %q", tt.line, err, tt.errHas)
		}
	}
}

func TestEvaluate(t *testing.T) {
	res := mustParse(t, sampleOutput)
	spec := `ceiling  | idtype.BenchmarkNext | 4000000 | ns/op per-second | >= 0.99
overhead | BenchmarkCreate/plugin | BenchmarkCreate/plain | ns/op | <= 1.1
allocs   | BenchmarkCreate/plugin | BenchmarkCreate/plain | allocs/op | <= 1.01
custom   | BenchmarkNextN/1000 | 4096000 | ids/s | >= 0.9
nogoal   | BenchmarkCreate/plain | 2 | B/op | -
missing  | BenchmarkGone | BenchmarkCreate/plain | ns/op | <= 1
nometric | BenchmarkParse/size-64 | 1 | allocs/op | <= 1
`
	ratios, err := ParseSpec(strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	rows := Evaluate(res, ratios)
	tests := []struct {
		num, den, value float64
		met             bool
		errHas          string
	}{
		{1e9 / 250, 4000000, 1.0, true, ""},
		{54000, 50000, 1.08, true, ""},
		{52, 50, 1.04, false, ""},
		{3998000, 4096000, 3998000.0 / 4096000, true, ""},
		{4000, 2, 2000, true, ""},
		{math.NaN(), 50000, math.NaN(), false, "not found"},
		{math.NaN(), 1, math.NaN(), false, "reported no allocs/op"},
	}
	for i, tt := range tests {
		r := rows[i]
		name := r.Ratio.Name
		if tt.errHas != "" {
			if r.Err == nil || !strings.Contains(r.Err.Error(), tt.errHas) {
				t.Errorf("%s: error %v, want one with %q", name, r.Err, tt.errHas)
			}
			if !math.IsNaN(r.Value) || r.Met() {
				t.Errorf("%s: value %v met %v, want NaN, not met", name, r.Value, r.Met())
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("%s: %v", name, r.Err)
			continue
		}
		if !near(r.Num, tt.num) || !near(r.Den, tt.den) || !near(r.Value, tt.value) || r.Met() != tt.met {
			t.Errorf("%s: %v / %v = %v met %v; want %v / %v = %v met %v",
				name, r.Num, r.Den, r.Value, r.Met(), tt.num, tt.den, tt.value, tt.met)
		}
	}
}

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func TestWriteTable(t *testing.T) {
	res := mustParse(t, sampleOutput)
	ratios, err := ParseSpec(strings.NewReader(`ceiling | idtype.BenchmarkNext | 4000000 | ns/op per-second | >= 0.99
overhead | BenchmarkCreate/plugin | BenchmarkCreate/plain | allocs/op | <= 1
gone | BenchmarkGone | 1 | ns/op | -
`))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, Evaluate(res, ratios)); err != nil {
		t.Fatal(err)
	}
	want := `| ratio | numerator | denominator | value | goal | met |
| --- | ---: | ---: | ---: | --- | --- |
| ceiling | 4000000 op/s (n=3) | 4000000 op/s (constant) | 1 | >= 0.99 | yes |
| overhead | 52 allocs/op (n=1) | 50 allocs/op (n=1) | 1.04 | <= 1 | no |
| gone | missing | 1 ns/op (constant) | - | - | n/a |

- gone (line 3): benchmark BenchmarkGone not found
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0.98765, "0.9877"},
		{1, "1"},
		{245.13, "245.1"},
		{4096000, "4096000"},
		{12345.6, "12346"},
		{0.000012345, "1.234e-05"},
		{math.NaN(), "NaN"},
	}
	for _, tt := range tests {
		if got := formatNumber(tt.v); got != tt.want {
			t.Errorf("formatNumber(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add("a | BenchmarkX | 4096000 | ns/op per-second | >= 0.99\n")
	f.Add("# c\nb|pkg.BenchmarkY/z|BenchmarkW|allocs/op|<1\n")
	f.Fuzz(func(t *testing.T, spec string) {
		ratios, err := ParseSpec(strings.NewReader(spec))
		if err != nil && !errors.Is(err, errSpec) {
			t.Fatalf("error %v does not wrap ErrSpec", err)
		}
		for _, r := range ratios {
			if r.Name == "" || r.Metric == "" || (r.Denominator == "" && r.Constant == 0) {
				t.Fatalf("accepted an incomplete ratio %+v", r)
			}
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add(sampleOutput)
	f.Add("BenchmarkX-8 10 1 ns/op\n")
	f.Fuzz(func(t *testing.T, out string) {
		res, err := Parse(strings.NewReader(out))
		if err != nil {
			return // only lines longer than the scanner's limit
		}
		for _, b := range res.Benchmarks {
			if !strings.HasPrefix(b.Name, "Benchmark") || len(b.Samples) == 0 {
				t.Fatalf("bad benchmark %+v", b)
			}
			if _, err := res.Find(b.Pkg + "." + b.Name); err != nil && b.Pkg != "" &&
				!strings.Contains(err.Error(), "ambiguous") {
				t.Fatalf("cannot find parsed benchmark %s.%s: %v", b.Pkg, b.Name, err)
			}
		}
	})
}

func ExampleEvaluate() {
	out := `pkg: example.com/ids
BenchmarkNext-8   1000000   250 ns/op
BenchmarkNext-8   1000000   260 ns/op
BenchmarkNext-8   1000000   240 ns/op
`
	spec := "ceiling | BenchmarkNext | 4096000 | ns/op per-second | >= 0.99\n"
	res, _ := Parse(strings.NewReader(out))
	ratios, _ := ParseSpec(strings.NewReader(spec))
	_ = WriteTable(os.Stdout, Evaluate(res, ratios))
	// Output:
	// | ratio | numerator | denominator | value | goal | met |
	// | --- | ---: | ---: | ---: | --- | --- |
	// | ceiling | 4000000 op/s (n=3) | 4096000 op/s (constant) | 0.9766 | >= 0.99 | no |
}
