package pgkit

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAdopt adopts a table of 1,000,000 rows with a child table of
// 1,000,000 rows that refers to it (a foreign key, indexed), and reports
// how long Apply held its locks ("lock-s": the whole transaction, during
// which nothing reads or writes either table):
//
//   - serial: an integer key and an integer foreign key, both widened to
//     bigint: both tables rewritten, their indexes rebuilt, the foreign key
//     checked again;
//   - bigserial: bigint already: only the default changes.
//
// Each op builds the tables afresh, outside the timing.
func BenchmarkAdopt(b *testing.B) {
	const rows = 1000000
	ctx := context.Background()
	db := adoptDB(b, ctx, "")
	for _, c := range []struct{ name, key, ref string }{
		{"serial", "serial", "int"},
		{"bigserial", "bigserial", "bigint"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var held time.Duration
			for b.Loop() {
				b.StopTimer()
				if _, err := db.ExecContext(ctx, fmt.Sprintf(`
					DROP TABLE IF EXISTS big_children, big_parents;
					CREATE TABLE big_parents (id %s PRIMARY KEY, name text NOT NULL);
					CREATE TABLE big_children (id bigserial PRIMARY KEY, parent_id %s NOT NULL REFERENCES big_parents (id), note text);
					CREATE INDEX ON big_children (parent_id);
					INSERT INTO big_parents (name) SELECT 'parent ' || i FROM generate_series(1, %d) i;
					INSERT INTO big_children (parent_id, note) SELECT i, 'child' FROM generate_series(1, %d) i;`,
					c.key, c.ref, rows, rows)); err != nil {
					b.Fatal(err)
				}
				if _, err := db.ExecContext(ctx, "VACUUM ANALYZE big_parents, big_children"); err != nil {
					b.Fatal(err)
				}
				plan, err := PlanAdopt(ctx, db, []string{"big_parents"}, AdoptOptions{LockTimeout: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := plan.Apply(ctx, db); err != nil {
					b.Fatal(err)
				}
				held += time.Since(start)
			}
			b.ReportMetric(held.Seconds()/float64(b.N), "lock-s")
		})
	}
}
