package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

func TestNewPartitionerOptions(t *testing.T) {
	l := idtype.DefaultLayout
	bad := map[string]func() (*Table, error){
		"empty table":   func() (*Table, error) { return New("", l, Options{}) },
		"three parts":   func() (*Table, error) { return New("a.b.c", l, Options{}) },
		"empty schema":  func() (*Table, error) { return New(".events", l, Options{}) },
		"name too long": func() (*Table, error) { return New(strings.Repeat("e", 54), l, Options{}) },
		"zero layout":   func() (*Table, error) { return New("events", idtype.Layout{}, Options{}) },
		"bad layout": func() (*Table, error) {
			return New("events", idtype.Layout{Epoch: l.Epoch, WorkerBits: 40}, Options{})
		},
		"period":          func() (*Table, error) { return New("events", l, Options{Period: 4}) },
		"negative period": func() (*Table, error) { return New("events", l, Options{Period: -1}) },
		"premake":         func() (*Table, error) { return New("events", l, Options{Premake: -2}) },
		"retention": func() (*Table, error) {
			return New("events", l, Options{Retention: -time.Hour})
		},
		"interval": func() (*Table, error) { return New("events", l, Options{Interval: -1}) },
		"lock timeout": func() (*Table, error) {
			return New("events", l, Options{LockTimeout: time.Microsecond})
		},
		"negative lock -2s": func() (*Table, error) {
			return New("events", l, Options{LockTimeout: -2 * time.Second})
		},
		"negative lock -1": func() (*Table, error) {
			return New("events", l, Options{LockTimeout: -1})
		},
	}
	for name, f := range bad {
		if p, err := f(); !errors.Is(err, idtype.ErrInvalidOptions) || p != nil {
			t.Errorf("%s: %v, %v; want nil and idtype.ErrInvalidOptions", name, p, err)
		} else if strings.Contains(name, "lock") && !strings.Contains(err.Error(), "LockTimeout") {
			t.Errorf("%s: %v does not name LockTimeout", name, err)
		}
	}
	p, err := New(strings.Repeat("e", 53), l, Options{})
	if err != nil {
		t.Fatalf("a 53-byte name (63 with _pYYYYMMDD): %v", err)
	}
	if p.period != Day || p.premake != DefaultPremake || p.retention != 0 || p.interval != DefaultInterval ||
		p.lockTimeout != DefaultLockTimeout || p.clock == nil || p.logger == nil {
		t.Errorf("zero options: %+v; want the documented defaults", p)
	}
	p, err = New("app.events", l, Options{Premake: -1, LockTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if p.premake != 0 || p.lockTimeout != time.Millisecond || p.Name() != "app.events" || p.quoted() != `"app"."events"` {
		t.Errorf("Premake -1, LockTimeout 1ms, app.events: %+v, quoted %s", p, p.quoted())
	}
}

func TestPeriods(t *testing.T) {
	cases := []struct {
		period           Period
		at, start, next  string
		suffix, asString string
	}{
		{Day, "2025-03-10T13:14:15.999Z", "2025-03-10T00:00:00Z", "2025-03-11T00:00:00Z", "_p20250310", "day"},
		{Day, "2025-03-10T00:00:00Z", "2025-03-10T00:00:00Z", "2025-03-11T00:00:00Z", "_p20250310", "day"},
		{Day, "2025-03-10T23:30:00-02:00", "2025-03-11T00:00:00Z", "2025-03-12T00:00:00Z", "_p20250311", "day"},
		{Day, "2024-12-31T23:59:59.999999999Z", "2024-12-31T00:00:00Z", "2025-01-01T00:00:00Z", "_p20241231", "day"},
		{Week, "2025-03-10T00:00:00Z", "2025-03-10T00:00:00Z", "2025-03-17T00:00:00Z", "_p20250310", "week"}, // a Monday
		{Week, "2025-03-16T23:59:59Z", "2025-03-10T00:00:00Z", "2025-03-17T00:00:00Z", "_p20250310", "week"}, // a Sunday
		{Week, "2025-01-01T12:00:00Z", "2024-12-30T00:00:00Z", "2025-01-06T00:00:00Z", "_p20241230", "week"},
		{Month, "2025-03-31T23:59:59Z", "2025-03-01T00:00:00Z", "2025-04-01T00:00:00Z", "_p202503", "month"},
		{Month, "2024-02-29T12:00:00Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z", "_p202402", "month"},
		{Month, "2024-12-15T00:00:00Z", "2024-12-01T00:00:00Z", "2025-01-01T00:00:00Z", "_p202412", "month"},
	}
	for _, c := range cases {
		s := c.period.start(date(c.at))
		if !s.Equal(date(c.start)) || s.Location() != time.UTC {
			t.Errorf("%s start of %s = %v, want %s UTC", c.period, c.at, s, c.start)
		}
		if n := c.period.next(s); !n.Equal(date(c.next)) {
			t.Errorf("%s after %s = %v, want %s", c.period, s, n, c.next)
		}
		if got := c.period.suffix(s); got != c.suffix {
			t.Errorf("%s suffix of %s = %s, want %s", c.period, s, got, c.suffix)
		}
		if c.period.String() != c.asString {
			t.Errorf("%d.String() = %s", c.period, c.period)
		}
	}
	if s := Period(9).String(); s != "Period(9)" {
		t.Errorf("Period(9).String() = %s", s)
	}
}

// newTestPartitioner is a Table on the default layout at a fixed
// time, for the plan tests.
func newTestPartitioner(t *testing.T, opts Options) *Table {
	t.Helper()
	p, err := New("events", idtype.DefaultLayout, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dayPart is the partition Maintain makes for the day that starts at s.
func dayPart(p *Table, s string) partition {
	lo, hi, _ := p.periodBounds(date(s))
	return partition{schema: "public", name: p.PartitionName(date(s)), lo: lo, hi: hi}
}

// names lists what a plan creates and removes, in order.
func names(acts []action) []string {
	var out []string
	for _, a := range acts {
		switch a.kind {
		case makeDefault, makePeriod:
			out = append(out, "+"+a.name)
		case removeExpired:
			for _, pt := range a.parts {
				out = append(out, "-"+pt.name)
			}
		}
	}
	return out
}

func TestPlan(t *testing.T) {
	now := date("2025-03-10T12:00:00Z")
	p := newTestPartitioner(t, Options{Premake: 2})
	st := &tableState{schema: "public", name: "events", key: "id"}

	acts, overlaps := p.due(st, now)
	if len(overlaps) != 0 {
		t.Fatal(overlaps)
	}
	want := "+events_default +events_p20250310 +events_p20250311 +events_p20250312"
	if got := strings.Join(names(acts), " "); got != want {
		t.Errorf("a new table: %s, want %s", got, want)
	}

	// Up to date: nothing to do.
	st.def = &partition{schema: "public", name: "events_default"}
	st.parts = []partition{dayPart(p, "2025-03-10T00:00:00Z"), dayPart(p, "2025-03-11T00:00:00Z"), dayPart(p, "2025-03-12T00:00:00Z")}
	if acts, overlaps := p.due(st, now); len(overlaps) != 0 || len(acts) != 0 {
		t.Errorf("an up-to-date table: %v, %v; want nothing", names(acts), overlaps)
	}

	// Three days without maintenance: the gap is filled.
	acts, _ = p.due(st, date("2025-03-15T00:00:00Z"))
	want = "+events_p20250313 +events_p20250314 +events_p20250315 +events_p20250316 +events_p20250317"
	if got := strings.Join(names(acts), " "); got != want {
		t.Errorf("after a pause: %s, want %s", got, want)
	}

	// Retention of 2 days at 03-12 12:00: the cutoff is 03-10 12:00, so the
	// 10th (which ends after it) stays; at 03-13 00:00 it goes.
	r := newTestPartitioner(t, Options{Premake: -1, Retention: 48 * time.Hour})
	st.parts = []partition{dayPart(r, "2025-03-09T00:00:00Z"), dayPart(r, "2025-03-10T00:00:00Z"),
		dayPart(r, "2025-03-11T00:00:00Z"), dayPart(r, "2025-03-12T00:00:00Z")}
	acts, _ = r.due(st, date("2025-03-12T12:00:00Z"))
	if got := strings.Join(names(acts), " "); got != "-events_p20250309" {
		t.Errorf("retention at 03-12 12:00: %s, want -events_p20250309", got)
	}
	acts, _ = r.due(st, date("2025-03-13T00:00:00Z"))
	if got := strings.Join(names(acts), " "); got != "+events_p20250313 -events_p20250309 -events_p20250310" {
		t.Errorf("retention at 03-13 00:00: %s", got)
	}
	acts, _ = r.due(st, date("2025-03-12T23:59:59.999Z"))
	if got := strings.Join(names(acts), " "); got != "-events_p20250309" {
		t.Errorf("retention 1 ms before the 10th's end is past: %s, want -events_p20250309", got)
	}
	// A long pause with retention: no partition is made for a period
	// already past it.
	acts, _ = r.due(st, date("2025-03-20T12:00:00Z"))
	if got := strings.Join(names(acts), " "); got != "+events_p20250318 +events_p20250319 +events_p20250320 "+
		"-events_p20250309 -events_p20250310 -events_p20250311 -events_p20250312" {
		t.Errorf("after a pause past retention: %s", got)
	}
	// Partitions Maintain did not make are never removed: another name,
	// or other bounds under its name.
	hand := dayPart(r, "2025-03-01T00:00:00Z")
	hand.name = "events_archive"
	odd := dayPart(r, "2025-03-02T00:00:00Z")
	odd.hi = finite(idtype.ID(odd.hi.v - 1))
	other := dayPart(r, "2025-03-03T00:00:00Z")
	other.schema = "elsewhere"
	st.parts = append([]partition{hand, odd, other}, st.parts...)
	acts, _ = r.due(st, date("2025-03-12T12:00:00Z"))
	if got := strings.Join(names(acts), " "); got != "-events_p20250309" {
		t.Errorf("with hand-made partitions: %s, want -events_p20250309 only", got)
	}

	// A partition over part of a period: no guess, the period is left,
	// named, and the others are made.
	half := dayPart(p, "2025-03-10T00:00:00Z")
	half.hi = finite(p.layout.FirstID(date("2025-03-10T12:00:00Z")))
	st.parts = []partition{half}
	acts, overlaps = p.due(st, now)
	if len(overlaps) != 1 || !errors.Is(overlaps[0].err, ErrOverlap) || !strings.Contains(overlaps[0].err.Error(), "2025-03-10") ||
		strings.Join(names(acts), " ") != "+events_p20250311 +events_p20250312" {
		t.Errorf("half a day partitioned by hand: %v, %v; want the 10th an ErrOverlap naming the day, the 11th and 12th made",
			names(acts), overlaps)
	}
	// Days made, then Period changed to Month: the month overlaps.
	m := newTestPartitioner(t, Options{Period: Month})
	st.parts = []partition{dayPart(p, "2025-03-10T00:00:00Z")}
	if _, overlaps := m.due(st, now); len(overlaps) != 1 || !errors.Is(overlaps[0].err, ErrOverlap) {
		t.Errorf("days, then months: %v, want ErrOverlap", overlaps)
	}
}

// TestPlanLayoutEnds: a layout whose time runs out soon after its epoch
// (20 time bits, 17 minutes): the last period runs to MAXVALUE, so the
// last IDs have a partition, and no period is made past it.
func TestPlanLayoutEnds(t *testing.T) {
	l := idtype.Layout{Epoch: date("2025-03-10T23:50:00Z"), WorkerBits: 21, SequenceBits: 22}
	p, err := New("events", l, Options{Premake: 3})
	if err != nil {
		t.Fatal(err)
	}
	st := &tableState{schema: "public", name: "events", key: "id", def: &partition{name: "events_default"}}
	acts, overlaps := p.due(st, date("2025-03-10T23:55:00Z"))
	if len(overlaps) != 0 {
		t.Fatal(overlaps)
	}
	if len(acts) != 2 {
		t.Fatalf("plan: %v; want the 10th (from the epoch) and the 11th (to the layout's end)", names(acts))
	}
	if a := acts[0]; a.lo != finite(0) || a.hi != finite(l.FirstID(date("2025-03-11T00:00:00Z"))) {
		t.Errorf("the epoch's day: [%s, %s)", a.lo, a.hi)
	}
	if a := acts[1]; a.hi != maxBound {
		t.Errorf("the last day: [%s, %s), want it to run to MAXVALUE", a.lo, a.hi)
	}
}

func TestParseBound(t *testing.T) {
	good := []struct {
		in     string
		def    bool
		lo, hi bound
	}{
		{"DEFAULT", true, bound{}, bound{}},
		{"FOR VALUES FROM ('1') TO ('2')", false, bound{v: 1}, bound{v: 2}},
		{"FOR VALUES FROM ('-5') TO ('100')", false, bound{v: -5}, bound{v: 100}},
		{"FOR VALUES FROM (MINVALUE) TO (MAXVALUE)", false, bound{inf: -1}, bound{inf: 1}},
		{"FOR VALUES FROM ('9223372036854775806') TO (MAXVALUE)", false, bound{v: math.MaxInt64 - 1}, maxBound},
		{"FOR VALUES FROM (7) TO (8)", false, bound{v: 7}, bound{v: 8}},
	}
	for _, c := range good {
		def, lo, hi, err := parseBound(c.in)
		if err != nil || def != c.def || lo != c.lo || hi != c.hi {
			t.Errorf("parseBound(%q) = %v, %v, %v, %v", c.in, def, lo, hi, err)
		}
	}
	for _, in := range []string{
		"", "default", "FOR VALUES IN ('1', '2')", "FOR VALUES WITH (modulus 4, remainder 0)",
		"FOR VALUES FROM ('1', '2') TO ('3', '4')", "FOR VALUES FROM ('a') TO ('b')",
		"FOR VALUES FROM ('2') TO ('1')", "FOR VALUES FROM ('1') TO ('1')", "FOR VALUES FROM (MAXVALUE) TO (MINVALUE)",
		"FOR VALUES FROM ('9223372036854775808') TO (MAXVALUE)", "FOR VALUES FROM ('1') TO ('2'", "FOR VALUES FROM ('1'') TO ('2')",
	} {
		if _, _, _, err := parseBound(in); !errors.Is(err, ErrNotPartitioned) {
			t.Errorf("parseBound(%q): %v, want ErrNotPartitioned", in, err)
		}
	}
}

// FuzzParseBound: no input panics, an error is always ErrNotPartitioned,
// and what parses is a non-empty range that reads back the same.
func FuzzParseBound(f *testing.F) {
	for _, s := range []string{"DEFAULT", "FOR VALUES FROM ('1') TO ('2')", "FOR VALUES FROM (MINVALUE) TO ('-3')",
		"FOR VALUES IN ('1')", "FOR VALUES FROM ('1') TO ('2') TO ('3')"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		def, lo, hi, err := parseBound(s)
		if err != nil {
			if !errors.Is(err, ErrNotPartitioned) {
				t.Fatalf("parseBound(%q): %v, not ErrNotPartitioned", s, err)
			}
			return
		}
		if def {
			return
		}
		if lo.cmp(hi) >= 0 {
			t.Fatalf("parseBound(%q) = [%s, %s), an empty range", s, lo, hi)
		}
		_, lo2, hi2, err := parseBound(fmt.Sprintf("FOR VALUES FROM (%s) TO (%s)", lo.sql(), hi.sql()))
		if err != nil || lo2 != lo || hi2 != hi {
			t.Fatalf("parseBound(%q) = [%s, %s), which reads back as [%s, %s), %v", s, lo, hi, lo2, hi2, err)
		}
	})
}

// The models of the key checks.
type (
	okModel struct {
		ID    idtype.ID `gorm:"primaryKey;uniqueIndex:ok_email,priority:2"`
		Email string    `gorm:"uniqueIndex:ok_email,priority:1"`
		Body  string    `gorm:"index"`
	}
	okComposite struct {
		Tenant int64     `gorm:"primaryKey;autoIncrement:false"`
		ID     idtype.ID `gorm:"primaryKey;uniqueIndex:okc_email"`
		Email  string    `gorm:"uniqueIndex:okc_email"`
	}
	uniqueField struct {
		ID    idtype.ID `gorm:"primaryKey"`
		Email string    `gorm:"unique"`
	}
	uniqueIndex struct {
		ID    idtype.ID `gorm:"primaryKey"`
		Email string    `gorm:"uniqueIndex"`
	}
	stringKey struct {
		ID   string `gorm:"primaryKey"`
		Body string
	}
	twoKeys struct {
		A int64 `gorm:"primaryKey;autoIncrement:false"`
		B int64 `gorm:"primaryKey;autoIncrement:false"`
	}
	pkWithoutKey struct {
		Code   string `gorm:"primaryKey"`
		Serial int64
	}
	parent struct {
		ID       idtype.ID `gorm:"primaryKey"`
		Children []child
	}
	child struct {
		ID       idtype.ID `gorm:"primaryKey"`
		ParentID idtype.ID
	}
)

func parseModel(t *testing.T, model any) *schema.Schema {
	t.Helper()
	s, err := schema.Parse(model, &sync.Map{}, schema.NamingStrategy{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKeyField(t *testing.T) {
	for _, c := range []struct {
		model  any
		column string
		want   string // the key's column, or "" for ErrKey
		says   string // what the error names
	}{
		{&okModel{}, "", "id", ""},
		{&okComposite{}, "id", "id", ""},
		{&okComposite{}, "", "", "2 primary key columns"},
		{&uniqueField{}, "", "", "Email is unique on its own"},
		{&uniqueIndex{}, "", "", "leaves out the partition key id"},
		{&stringKey{}, "", "", "not a 64-bit integer"},
		{&twoKeys{}, "", "", "Options.Column"},
		{&pkWithoutKey{}, "serial", "", "primary key (code) leaves out the partition key serial"},
		{&okModel{}, "nothing", "", `no column "nothing"`},
	} {
		p := newTestPartitioner(t, Options{Column: c.column})
		f, err := p.keyField(parseModel(t, c.model))
		switch {
		case c.want != "" && (err != nil || f.DBName != c.want):
			t.Errorf("%T, Column %q: %v, %v; want key %s", c.model, c.column, f, err, c.want)
		case c.want == "" && (!errors.Is(err, ErrKey) || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%T, Column %q: %v; want ErrKey saying %q", c.model, c.column, err, c.says)
		}
	}
}

func TestCheckServer(t *testing.T) {
	plain, referenced := parseModel(t, &okModel{}), parseModel(t, &parent{})
	for _, c := range []struct {
		version int
		sch     *schema.Schema
		ok      bool
	}{
		{100023, plain, false}, {110000, plain, true}, {110000, referenced, false},
		{120000, referenced, true}, {150018, referenced, true},
	} {
		err := checkServer(c.version, c.sch)
		if c.ok && err != nil || !c.ok && !errors.Is(err, ErrServer) {
			t.Errorf("version %d, model %s: %v", c.version, c.sch.Name, err)
		}
	}
	if err := checkServer(110000, referenced); !strings.Contains(fmt.Sprint(err), "children") {
		t.Errorf("the error does not name the referencing table: %v", err)
	}
}

// TestDefaultLoggerQuiet: without Options.Logger, Run logs nothing at info
// (routine maintenance) and passes warnings and errors (a failed
// maintenance, rows left in the default partition) to the default logger.
// It fails if the default were slog.Default() itself, which takes info.
func TestDefaultLoggerQuiet(t *testing.T) {
	p, err := New("events", idtype.DefaultLayout, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if !slog.Default().Enabled(ctx, slog.LevelInfo) {
		t.Fatal("the default logger takes no info lines: the test would show nothing")
	}
	if p.logger.Enabled(ctx, slog.LevelInfo) {
		t.Error("the default Logger takes info lines")
	}
	if !p.logger.Enabled(ctx, slog.LevelWarn) || !p.logger.With("table", "events").Enabled(ctx, slog.LevelError) {
		t.Error("the default Logger drops warnings or errors")
	}
}
