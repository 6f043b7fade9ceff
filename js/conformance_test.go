// Package js_test is the Go half of the TypeScript package's tests: it
// builds the package with the tools its lockfile pins, runs its tests in
// Node, and checks every result of the package against vectors that
// idtype makes at test time (one truth across both languages).
package js_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 10*time.Minute))
}

// lastDateMs is the last millisecond a JavaScript Date holds (year
// 275760): the package refuses a layout whose last time is past it.
const lastDateMs = 8_640_000_000_000_000

// The layouts the vectors cover: the default, others in use, and each
// extreme that Layout.Validate allows.
var layouts = []struct {
	name string
	l    idtype.Layout
}{
	{"default", idtype.DefaultLayout},
	{"discord", layout("2015-01-01T00:00:00Z", 10, 12)},
	{"example narrow", layout("2020-01-01T00:00:00Z", 5, 13)},
	{"sonyflake split", layout("2014-09-01T00:00:00Z", 16, 8)},
	{"no worker bits", layout("2024-01-01T00:00:00Z", 0, 22)},
	{"fewest time bits", layout("2025-06-01T12:34:56.789Z", 31, 12)},
	{"most time bits a Date holds", layout("1970-01-01T00:00:00Z", 5, 6)},
	{"past the last Date", layout("1970-01-01T00:00:00Z", 5, 5)},
}

func layout(epoch string, worker, seq uint) idtype.Layout {
	t, err := time.Parse(time.RFC3339Nano, epoch)
	if err != nil {
		panic(err)
	}
	return idtype.Layout{Epoch: t, WorkerBits: worker, SequenceBits: seq}
}

// The vectors, as conformance.js reads them; every ID is its decimal
// string (idtype.ID's JSON).
type vectors struct {
	Seed    uint64          `json:"seed"`
	Layouts []layoutVectors `json:"layouts"`
	Parse   []parseVector   `json:"parse"`
	Compare []compareVector `json:"compare"`
	Sort    []sortVector    `json:"sort"`
	JSON    []jsonVector    `json:"json"`
}

type jsLayout struct {
	Epoch        int64 `json:"epoch"`
	WorkerBits   uint  `json:"workerBits"`
	SequenceBits uint  `json:"sequenceBits"`
}

type layoutVectors struct {
	Name      string   `json:"name"`
	Layout    jsLayout `json:"layout"`
	JSRefuses bool     `json:"jsRefuses"`
	TimeBits  uint     `json:"timeBits"`
	// Server is the layout as the example's GET /api/layout writes it.
	Server map[string]any `json:"server"`
	Decode []decodeVector `json:"decode"`
	Times  []timeVector   `json:"times"`
}

type decodeVector struct {
	ID        idtype.ID `json:"id"`
	Timestamp int64     `json:"timestamp"`
	Worker    int64     `json:"worker"`
	Sequence  int64     `json:"sequence"`
}

type timeVector struct {
	Timestamp int64     `json:"timestamp"`
	First     idtype.ID `json:"first"`
	Last      idtype.ID `json:"last"`
}

type parseVector struct {
	Input string `json:"input"`
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
}

type compareVector struct {
	A   idtype.ID `json:"a"`
	B   idtype.ID `json:"b"`
	Cmp int       `json:"cmp"`
}

type sortVector struct {
	IDs    []idtype.ID `json:"ids"`
	Sorted []idtype.ID `json:"sorted"`
}

type jsonVector struct {
	Text string         `json:"text"`
	Want map[string]any `json:"want"`
}

// report is what conformance.test.mjs writes: how many vectors of each
// group it checked, and each that differed.
type report struct {
	Checked    map[string]int `json:"checked"`
	Mismatches []struct {
		Name string `json:"name"`
		Want any    `json:"want"`
		Got  any    `json:"got"`
	} `json:"mismatches"`
}

// checkedCounts is how many vectors of each group conformance.js checks.
func (v *vectors) checkedCounts() map[string]int {
	n := map[string]int{
		"parse":   len(v.Parse),
		"compare": len(v.Compare),
		"sort":    len(v.Sort),
		"json":    len(v.JSON),
	}
	for _, l := range v.Layouts {
		if l.JSRefuses {
			n["layout "+l.Name] = 1
		} else {
			n["layout "+l.Name] = 3 + len(l.Decode) + len(l.Times)
		}
	}
	return n
}

func makeVectors(seed uint64) *vectors {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	v := &vectors{Seed: seed}
	for _, c := range layouts {
		if err := c.l.Validate(); err != nil {
			panic(err)
		}
		v.Layouts = append(v.Layouts, layoutVectorsOf(c.name, c.l, rng))
	}
	v.Parse = parseVectors(rng)
	pool := idPool(rng)
	for range 200 {
		a, b := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
		if rng.IntN(8) == 0 {
			b = a
		}
		v.Compare = append(v.Compare, compareVector{a, b, cmp.Compare(a, b)})
	}
	for range 8 {
		ids := make([]idtype.ID, 1+rng.IntN(30))
		for i := range ids {
			ids[i] = pool[rng.IntN(len(pool))]
		}
		sorted := slices.Clone(ids)
		slices.Sort(sorted)
		v.Sort = append(v.Sort, sortVector{ids, sorted})
	}
	v.JSON = jsonVectors(pool, rng)
	return v
}

// fieldMaxima are the IDs made of each combination of the time, worker
// and sequence fields at 0 and at their largest.
func fieldMaxima(l idtype.Layout) []idtype.ID {
	maxT := int64(1)<<l.TimeBits() - 1
	var ids []idtype.ID
	for _, t := range []int64{0, 1, maxT} {
		for _, w := range []int64{0, l.MaxWorker()} {
			for _, s := range []int64{0, l.MaxSequence()} {
				ids = append(ids, idtype.ID(t<<(l.WorkerBits+l.SequenceBits)|w<<l.SequenceBits|s))
			}
		}
	}
	return ids
}

// boundaries are the IDs where a number type or a field ends.
var boundaries = []idtype.ID{0, 1, 2, 1<<53 - 1, 1 << 53, 1<<53 + 1, 1<<62 - 1, 1 << 62, idtype.MaxID - 1, idtype.MaxID}

func layoutVectorsOf(name string, l idtype.Layout, rng *rand.Rand) layoutVectors {
	lv := layoutVectors{
		Name:      name,
		Layout:    jsLayout{l.Epoch.UnixMilli(), l.WorkerBits, l.SequenceBits},
		JSRefuses: l.MaxTime().UnixMilli() > lastDateMs,
		TimeBits:  l.TimeBits(),
		Server: map[string]any{
			"epoch":         l.Epoch.UTC(),
			"epoch_ms":      l.Epoch.UnixMilli(),
			"time_bits":     l.TimeBits(),
			"worker_bits":   l.WorkerBits,
			"sequence_bits": l.SequenceBits,
		},
	}
	if lv.JSRefuses {
		return lv
	}
	ids := append(slices.Clone(boundaries), fieldMaxima(l)...)
	for range 64 {
		ids = append(ids, idtype.ID(rng.Int64()))
	}
	first, last := l.Epoch.UnixMilli(), l.MaxTime().UnixMilli()
	for range 32 {
		id, err := l.Compose(time.UnixMilli(first+rng.Int64N(last-first+1)), rng.Int64N(l.MaxWorker()+1), rng.Int64N(l.MaxSequence()+1))
		if err != nil {
			panic(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		p := l.Decode(id)
		lv.Decode = append(lv.Decode, decodeVector{id, p.Time.UnixMilli(), p.Worker, p.Sequence})
	}
	times := []int64{first - 1, first, first + 1, last - 1, last, last + 1, -lastDateMs, 0, lastDateMs}
	for range 32 {
		times = append(times, first+rng.Int64N(last-first+1))
	}
	for range 4 {
		times = append(times, -lastDateMs+rng.Int64N(2*lastDateMs+1))
	}
	for _, ms := range times {
		t := time.UnixMilli(ms)
		lv.Times = append(lv.Times, timeVector{ms, l.FirstID(t), l.LastID(t)})
	}
	return lv
}

func parseVectors(rng *rand.Rand) []parseVector {
	inputs := []string{
		"", "0", "1", "-0", "-1", "-", "+1", "00", "007", "01", "1.5", "1.0", "1e3", "1E3", " 1", "1 ", "\t1", "1\n",
		"9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
		"99999999999999999999x", "12a", "0x10", "1_000", "١٢", "１", "-9223372036854775808", "--1", "+", ".", "e",
		"9007199254740993", "9007199254740992",
	}
	for _, id := range boundaries {
		inputs = append(inputs, id.String())
	}
	const junk = "0123456789012345678901234567890123456789-+. e_x"
	for range 300 {
		var b strings.Builder
		for range rng.IntN(24) {
			if rng.IntN(3) == 0 {
				b.WriteByte(junk[rng.IntN(len(junk))])
			} else {
				b.WriteByte(byte('0' + rng.IntN(10)))
			}
		}
		inputs = append(inputs, b.String())
	}
	var out []parseVector
	for _, s := range inputs {
		id, err := idtype.Parse(s)
		switch {
		case err == nil:
			out = append(out, parseVector{Input: s, ID: id.String()})
		case errors.Is(err, idtype.ErrEmpty):
			out = append(out, parseVector{Input: s, Error: "empty"})
		case errors.Is(err, idtype.ErrSyntax):
			out = append(out, parseVector{Input: s, Error: "syntax"})
		case errors.Is(err, idtype.ErrNegative):
			out = append(out, parseVector{Input: s, Error: "negative"})
		case errors.Is(err, idtype.ErrRange):
			out = append(out, parseVector{Input: s, Error: "range"})
		default:
			panic(fmt.Sprintf("Parse(%q): an error of no known kind: %v", s, err))
		}
	}
	return out
}

// idPool is IDs of every length in decimal, where text order and number
// order part.
func idPool(rng *rand.Rand) []idtype.ID {
	pool := slices.Clone(boundaries)
	for range 100 {
		pool = append(pool, idtype.ID(rng.Int64N(int64(1)<<(1+rng.IntN(62)))))
	}
	return pool
}

func jsonVectors(pool []idtype.ID, rng *rand.Rand) []jsonVector {
	type post struct {
		ID       idtype.ID      `json:"id"`
		AuthorID idtype.ID      `json:"author_id"`
		ParentID sqltype.NullID `json:"parent_id"`
		TagIDs   sqltype.IDs    `json:"tag_ids"`
		Title    string         `json:"title"`
		Likes    int            `json:"likes"`
	}
	pick := func() idtype.ID { return pool[rng.IntN(len(pool))] }
	var out []jsonVector
	for i := range 8 {
		p := post{ID: pick(), AuthorID: pick(), Title: fmt.Sprintf("post %d", i), Likes: i}
		want := map[string]any{"id": p.ID.String(), "author_id": p.AuthorID.String(), "parent_id": nil, "tag_ids": nil,
			"title": p.Title, "likes": i}
		if i%2 == 1 {
			p.ParentID = sqltype.NewNullID(pick())
			want["parent_id"] = p.ParentID.ID.String()
		}
		if i%3 != 0 {
			p.TagIDs = sqltype.IDs{}
			tags := []any{}
			for range i {
				id := pick()
				p.TagIDs = append(p.TagIDs, id)
				tags = append(tags, id.String())
			}
			want["tag_ids"] = tags
		}
		b, err := json.Marshal(p)
		if err != nil {
			panic(err)
		}
		out = append(out, jsonVector{string(b), want})
	}
	return out
}

// sources are what the build and the tests read, copied from js/ so
// that a run leaves the checkout as it was.
var sources = []string{"package.json", "package-lock.json", "tsconfig.json", "tsconfig.test.json", "src", "test", "scripts"}

// TestPackage builds the package from a copy of js/ with the tools the
// lockfile pins (npm ci), type-checks it and its type tests, checks that
// the example page's copy of the module is what the build produces, then
// runs every test in Node, the conformance test among them with vectors
// made here, and sees that test fail on a vector corrupted on purpose.
func TestPackage(t *testing.T) {
	ctx := testenv.Deadline(t, 8*time.Minute)
	node, npm := tool(t, "node"), tool(t, "npm")
	dir := t.TempDir()
	for _, s := range sources {
		if err := copyTo(filepath.Join(dir, s), s); err != nil {
			t.Fatal(err)
		}
	}
	run(ctx, t, dir, nil, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline")
	run(ctx, t, dir, nil, npm, "run", "build")
	run(ctx, t, dir, nil, npm, "run", "check")

	built, err := os.ReadFile(filepath.Join(dir, "build", "snowkey.js"))
	if err != nil {
		t.Fatal(err)
	}
	const page = "../examples/server/web/snowkey.js"
	served, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, served) {
		t.Errorf("%s is not what the build produces (%s); run `npm run build && npm run page` in js/", page, firstDiff(served, built))
	}

	seed := rand.Uint64()
	if s := os.Getenv("SNOWKEY_VECTORS_SEED"); s != "" {
		// To run again on the vectors of a failed run, which logs its seed.
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SNOWKEY_VECTORS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("vectors from seed %d (SNOWKEY_VECTORS_SEED=%d makes them again)", seed, seed)
	v := makeVectors(seed)
	for _, l := range v.Layouts {
		t.Logf("layout %q: %d decode and %d time vectors", l.Name, len(l.Decode), len(l.Times))
	}
	rep, out, err := conform(ctx, t, node, dir, v, "test/")
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "# core:") || strings.HasPrefix(line, "# tests ") || strings.HasPrefix(line, "# pass ") {
			t.Log(strings.TrimPrefix(line, "# "))
		}
	}
	t.Logf("vectors checked, per group: %v", rep.Checked)
	if want := v.checkedCounts(); !equalCounts(rep.Checked, want) {
		t.Errorf("the JS side checked %v vectors, the Go side made %v", rep.Checked, want)
	}

	// The control: one vector corrupted, which the JS side must find, by
	// name, and nothing else.
	l := &v.Layouts[0]
	k := rng(seed).IntN(len(l.Decode))
	l.Decode[k].Worker ^= 1
	wantName := fmt.Sprintf("%s: decode[%d] %s", l.Name, k, l.Decode[k].ID)
	rep, out, err = conform(ctx, t, node, dir, v, "test/conformance.test.mjs")
	if err == nil {
		t.Fatalf("control: node passed on a corrupted vector (%s)\n%s", wantName, out)
	}
	if len(rep.Mismatches) != 1 || rep.Mismatches[0].Name != wantName {
		t.Errorf("control: mismatches %+v; want exactly %q\n%s", rep.Mismatches, wantName, out)
	}
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

// conform writes v, runs node --test on the given test files with it and
// returns the report the conformance test wrote.
func conform(ctx context.Context, t *testing.T, node, dir string, v *vectors, files string) (report, string, error) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	vf, rf := filepath.Join(dir, "vectors.json"), filepath.Join(dir, "report.json")
	os.Remove(rf)
	if err := os.WriteFile(vf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, "--test", files)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SNOWKEY_VECTORS="+vf, "SNOWKEY_REPORT="+rf)
	out, runErr := cmd.CombinedOutput()
	var rep report
	rb, err := os.ReadFile(rf)
	if err != nil {
		t.Fatalf("the conformance test wrote no report (%v); node: %v\n%s", err, runErr, out)
	}
	if err := json.Unmarshal(rb, &rep); err != nil {
		t.Fatalf("report %s: %v", rb, err)
	}
	return rep, string(out), runErr
}

// copyTo copies the file or directory src to dst.
func copyTo(dst, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.CopyFS(dst, os.DirFS(src))
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	return true
}

// tool finds a program in PATH or skips the test (fails it under CI).
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Skip(t, fmt.Sprintf("no %s in PATH (%v): `make test` installs Node.js and npm", name, err))
	}
	return p
}

func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// firstDiff says where two files part.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: %q, the build has %q", i+1, x, y)
		}
	}
	return "same lines, other bytes"
}
