package bulk

import (
	"context"
	"database/sql"
	"fmt"
	"iter"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
)

// The graph of the bulk benchmarks: parents with children, the children's
// parent column indexed and a foreign key (AutoMigrate makes both).
type (
	BulkBenchParent struct {
		ID        idtype.ID `gorm:"primaryKey"`
		Name      string
		Score     int64
		CreatedAt time.Time
		Children  []BulkBenchChild `gorm:"foreignKey:ParentID"`
	}
	BulkBenchChild struct {
		ID       idtype.ID `gorm:"primaryKey"`
		ParentID idtype.ID `gorm:"index"`
		Label    string
		Qty      int32
	}
)

// benchInput makes n parents with children each.
func benchInput(n, children int) []BulkBenchParent {
	ps := make([]BulkBenchParent, n)
	cs := make([]BulkBenchChild, n*children)
	for i := range ps {
		ps[i] = BulkBenchParent{Name: fmt.Sprintf("parent %d", i), Score: int64(i)}
		if children > 0 {
			ps[i].Children = cs[i*children : (i+1)*children : (i+1)*children]
			for k := range ps[i].Children {
				ps[i].Children[k] = BulkBenchChild{Label: "child", Qty: int32(k)}
			}
		}
	}
	return ps
}

// benchCopy is the hand-written baseline: the keys from one NextN per
// table, the foreign keys set, and one pgx CopyFrom per table, in one
// transaction, through the same connection pool as the bulk load.
func benchCopy(ctx context.Context, db *gorm.DB, gen idtype.Source, ps []BulkBenchParent, now time.Time) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return benchRaw(ctx, sqlDB, func(conn *pgx.Conn) error {
		ids := make([]idtype.ID, len(ps))
		if err := gen.NextN(ids); err != nil {
			return err
		}
		nChildren := 0
		for i := range ps {
			ps[i].ID, ps[i].CreatedAt = ids[i], now
			nChildren += len(ps[i].Children)
		}
		cids := make([]idtype.ID, nChildren)
		if err := gen.NextN(cids); err != nil {
			return err
		}
		children := make([]*BulkBenchChild, 0, nChildren)
		for i := range ps {
			for k := range ps[i].Children {
				c := &ps[i].Children[k]
				c.ID, c.ParentID = cids[len(children)], ps[i].ID
				children = append(children, c)
			}
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"bulk_bench_parents"}, []string{"id", "name", "score", "created_at"},
			pgx.CopyFromSlice(len(ps), func(i int) ([]any, error) {
				p := &ps[i]
				return []any{p.ID, p.Name, p.Score, p.CreatedAt}, nil
			})); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"bulk_bench_children"}, []string{"id", "parent_id", "label", "qty"},
			pgx.CopyFromSlice(len(children), func(i int) ([]any, error) {
				c := children[i]
				return []any{c.ID, c.ParentID, c.Label, c.Qty}, nil
			})); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// benchRaw runs fn on a pgx connection of sqlDB's pool.
func benchRaw(ctx context.Context, sqlDB *sql.DB, fn func(*pgx.Conn) error) error {
	c, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error { return fn(dc.(*stdlib.Conn).Conn()) })
}

// benchDB opens a fresh database with the plugin and the benchmark's
// tables.
func benchDB(b *testing.B) (*gorm.DB, *idtype.Generator) {
	gen := newGen(b, 1)
	db := openDB(b, gen, &BulkBenchParent{}, &BulkBenchChild{})
	return db, gen
}

func benchTruncate(b *testing.B, db *gorm.DB) {
	b.Helper()
	if err := db.Exec("TRUNCATE bulk_bench_parents, bulk_bench_children").Error; err != nil {
		b.Fatal(err)
	}
	if err := db.Exec("VACUUM ANALYZE bulk_bench_parents, bulk_bench_children").Error; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBulkGraph loads 100,000 parents with 3 children each into empty
// tables (the children's parent column has an index and a foreign key)
// three ways:
//
//   - bulk: Create;
//   - copy: a hand-written pgx CopyFrom of the same rows, keys from one
//     NextN per table, in one transaction: the physical limit;
//   - batches: GORM's CreateInBatches(1000) with the plugin.
//
// Each op runs the three, timed one by one, in an order that rotates from
// op to op; the input is built and the tables are emptied between them,
// outside the timings. It reports each one's rows/s and the ratios of
// their times taken over the same seconds: "bulk/copy" is copy's time over
// bulk's (1 means bulk is as fast as the hand-written copy), and
// "bulk/batches" is CreateInBatches' time over bulk's.
func BenchmarkBulkGraph(b *testing.B) {
	const parents, children = 100000, 3
	ctx := context.Background()
	db, gen := benchDB(b)
	now := time.Now()
	variants := []struct {
		name string
		load func([]BulkBenchParent) error
	}{
		{"bulk", func(ps []BulkBenchParent) error {
			_, err := Create(ctx, db, gen, ps, Options{})
			return err
		}},
		{"copy", func(ps []BulkBenchParent) error { return benchCopy(ctx, db, gen, ps, now) }},
		{"batches", func(ps []BulkBenchParent) error { return db.CreateInBatches(&ps, 1000).Error }},
	}
	spent := make([]time.Duration, len(variants))
	op := 0
	for b.Loop() {
		for k := range variants {
			v := (op + k) % len(variants)
			b.StopTimer()
			input := benchInput(parents, children)
			benchTruncate(b, db)
			runtime.GC()
			b.StartTimer()
			start := time.Now()
			if err := variants[v].load(input); err != nil {
				b.Fatalf("%s: %v", variants[v].name, err)
			}
			spent[v] += time.Since(start)
			if n := countRows(b, ctx, db, "bulk_bench_children"); n != parents*children {
				b.Fatalf("%s: %d children written", variants[v].name, n)
			}
		}
		op++
	}
	rows := float64(parents*(1+children)) * float64(b.N)
	for i, v := range variants {
		b.ReportMetric(rows/spent[i].Seconds(), v.name+"-rows/s")
	}
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "bulk/copy")
	b.ReportMetric(spent[2].Seconds()/spent[0].Seconds(), "bulk/batches")
}

// BenchmarkBulkTable is BenchmarkBulkGraph for the parents table alone:
// 100,000 rows, no association.
func BenchmarkBulkTable(b *testing.B) {
	const parents = 100000
	ctx := context.Background()
	db, gen := benchDB(b)
	now := time.Now()
	variants := []struct {
		name string
		load func([]BulkBenchParent) error
	}{
		{"bulk", func(ps []BulkBenchParent) error {
			_, err := Create(ctx, db, gen, ps, Options{})
			return err
		}},
		{"copy", func(ps []BulkBenchParent) error { return benchCopy(ctx, db, gen, ps, now) }},
		{"batches", func(ps []BulkBenchParent) error { return db.CreateInBatches(&ps, 1000).Error }},
	}
	spent := make([]time.Duration, len(variants))
	op := 0
	for b.Loop() {
		for k := range variants {
			v := (op + k) % len(variants)
			b.StopTimer()
			input := benchInput(parents, 0)
			benchTruncate(b, db)
			runtime.GC()
			b.StartTimer()
			start := time.Now()
			if err := variants[v].load(input); err != nil {
				b.Fatalf("%s: %v", variants[v].name, err)
			}
			spent[v] += time.Since(start)
		}
		op++
	}
	rows := float64(parents) * float64(b.N)
	for i, v := range variants {
		b.ReportMetric(rows/spent[i].Seconds(), v.name+"-rows/s")
	}
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "bulk/copy")
	b.ReportMetric(spent[2].Seconds()/spent[0].Seconds(), "bulk/batches")
}

// BenchmarkBulkPeakHeap loads 1,000,000 parents (no children) three ways
// and reports the most heap each one kept alive above what the process
// held before it started (the input included), in MB:
//
//   - bulk: Create of a slice;
//   - batches: CreateInBatches(1000) of the same slice, with the plugin;
//   - stream: CreateSeq of rows made as the load reads them, so that
//     no more than a batch of them exists at a time.
//
// See peakHeap for how it is measured; ns/op is slowed by the
// frequent collections and is not the point here. "bulk/batches" is
// CreateInBatches' peak over bulk's.
func BenchmarkBulkPeakHeap(b *testing.B) {
	const parents = 1000000
	ctx := context.Background()
	db, gen := benchDB(b)
	variants := []struct {
		name  string
		input bool
		load  func([]BulkBenchParent) error
	}{
		{"bulk", true, func(ps []BulkBenchParent) error {
			_, err := Create(ctx, db, gen, ps, Options{})
			return err
		}},
		{"batches", true, func(ps []BulkBenchParent) error { return db.CreateInBatches(&ps, 1000).Error }},
		{"stream", false, func([]BulkBenchParent) error {
			_, err := CreateSeq(ctx, db, gen, benchStream(parents, 0), Options{})
			return err
		}},
	}
	peaks := make([]float64, len(variants))
	op := 0
	for b.Loop() {
		for k := range variants {
			v := (op + k) % len(variants)
			b.StopTimer()
			var input []BulkBenchParent
			if variants[v].input {
				input = benchInput(parents, 0)
			}
			benchTruncate(b, db)
			b.StartTimer()
			peak, err := peakHeap(func() error { return variants[v].load(input) })
			if err != nil {
				b.Fatalf("%s: %v", variants[v].name, err)
			}
			runtime.KeepAlive(input)
			peaks[v] += float64(peak) / (1 << 20)
		}
		op++
	}
	for i, v := range variants {
		b.ReportMetric(peaks[i]/float64(b.N), v.name+"-peak-MB")
	}
	b.ReportMetric(peaks[1]/peaks[0], "bulk/batches")
}

// benchStream yields n parents with children each, made one by one.
func benchStream(n, children int) iter.Seq[*BulkBenchParent] {
	return func(yield func(*BulkBenchParent) bool) {
		for i := range n {
			p := &BulkBenchParent{Name: fmt.Sprintf("parent %d", i), Score: int64(i)}
			for k := range children {
				p.Children = append(p.Children, BulkBenchChild{Label: "child", Qty: int32(k)})
			}
			if !yield(p) {
				return
			}
		}
	}
}

// peakHeap runs fn with the collector at GOGC=10 and returns the
// most heap that fn kept alive: the largest live heap that a collection
// found (runtime/metrics /gc/heap/live:bytes) while fn ran, less the live
// heap just before. GOGC=10 makes collections, and so measurements,
// frequent; what a collection finds alive does not depend on it, where
// the heap's total size would count the garbage it lets pile up.
func peakHeap(fn func() error) (uint64, error) {
	old := debug.SetGCPercent(10)
	defer debug.SetGCPercent(old)
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	err := fn()
	close(done)
	wg.Wait()
	peak = max(peak, read())
	if peak < base {
		return 0, err
	}
	return peak - base, err
}
