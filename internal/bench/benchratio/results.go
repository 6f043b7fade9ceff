package benchratio

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Benchmark is one benchmark of one package with every value it reported.
type Benchmark struct {
	// Pkg is the import path from the "pkg:" line before it, or "".
	Pkg string
	// Name is the name as printed, with its GOMAXPROCS suffix (BenchmarkX/y-8).
	Name string
	// Samples holds, per unit (ns/op, B/op, custom …), one value per run.
	Samples map[string][]float64
}

// baseName returns the name without the "-N" GOMAXPROCS suffix that go test
// adds when GOMAXPROCS is not 1.
func (b *Benchmark) baseName() string {
	return trimProcs(b.Name)
}

// units returns the units b reported, sorted.
func (b *Benchmark) units() []string {
	units := make([]string, 0, len(b.Samples))
	for u := range b.Samples {
		units = append(units, u)
	}
	slices.Sort(units)
	return units
}

func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}

// Results are the benchmarks found in `go test -bench` output, in the order
// they first appeared.
type Results struct {
	// Benchmarks holds one entry per package and printed name.
	Benchmarks []*Benchmark
}

// Parse reads `go test -bench` output. It keeps result lines, such as
//
//	BenchmarkNext-8   	 5000000	       244.1 ns/op	       0 B/op	       0 allocs/op
//
// and "pkg:" lines, and ignores everything else (test output, PASS/ok
// lines, logs), so the output of several `go test` runs may be
// concatenated. Runs of the same benchmark (-count N) add samples to it.
// The error is only for a failure to read.
func Parse(r io.Reader) (*Results, error) {
	res := &Results{}
	index := map[[2]string]*Benchmark{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		name, samples, ok := parseLine(line)
		if !ok {
			continue
		}
		k := [2]string{pkg, name}
		b := index[k]
		if b == nil {
			b = &Benchmark{Pkg: pkg, Name: name, Samples: map[string][]float64{}}
			index[k] = b
			res.Benchmarks = append(res.Benchmarks, b)
		}
		for unit, v := range samples {
			b.Samples[unit] = append(b.Samples[unit], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmark output: %w", err)
	}
	return res, nil
}

// parseLine parses one result line: name, iteration count, then value/unit
// pairs.
func parseLine(line string) (name string, samples map[string]float64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", nil, false
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return "", nil, false
	}
	samples = make(map[string]float64, (len(f)-2)/2)
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		samples[f[i+1]] = v
	}
	return f[0], samples, true
}

// Find returns the benchmark that ref names: "BenchmarkX/sub", or
// "pkg.BenchmarkX/sub" where pkg is the import path or its last elements.
// The name is matched as printed first, then without the GOMAXPROCS
// suffix. It fails when nothing or more than one benchmark matches.
func (r *Results) Find(ref string) (*Benchmark, error) {
	var exact, base []*Benchmark
	for _, b := range r.Benchmarks {
		e, m := false, false
		for _, q := range splitRef(ref) {
			if q.pkg != "" && !pkgMatches(b.Pkg, q.pkg) {
				continue
			}
			e = e || q.name == b.Name
			m = m || q.name == b.baseName()
		}
		switch {
		case e:
			exact = append(exact, b)
		case m:
			base = append(base, b)
		}
	}
	found := exact
	if len(found) == 0 {
		found = base
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("benchmark %s not found", ref)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, b := range found {
		names = append(names, b.Pkg+"."+b.Name)
	}
	return nil, fmt.Errorf("benchmark %s is ambiguous: %s; name it with its package or its -N suffix",
		ref, strings.Join(names, ", "))
}

type query struct{ pkg, name string }

// splitRef returns the ways to read ref: as a bare benchmark name, and
// split into package and name at each ".Benchmark" (sub-benchmark names
// and package paths may hold that too, so all readings are tried).
func splitRef(ref string) []query {
	var qs []query
	if strings.HasPrefix(ref, "Benchmark") {
		qs = append(qs, query{"", ref})
	}
	for i := 0; ; {
		j := strings.Index(ref[i:], ".Benchmark")
		if j < 0 {
			break
		}
		i += j
		if i > 0 {
			qs = append(qs, query{ref[:i], ref[i+1:]})
		}
		i++
	}
	return qs
}

// pkgMatches reports whether the import path full is want or ends in
// "/"+want.
func pkgMatches(full, want string) bool {
	return full == want || strings.HasSuffix(full, "/"+want)
}

// Median returns the median of xs: the middle value, or the mean of the two
// middle values for an even count. It is NaN for no values.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return nan
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
