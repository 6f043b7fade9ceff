package adopt

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
// The tables are built once; between ops, outside the timing, they are
// put back as they were (the columns narrowed again, the sequence's
// default and ownership restored), which costs about what adopting does
// and far less than building them again.
func BenchmarkAdopt(b *testing.B) {
	const rows = 1000000
	ctx := context.Background()
	db := openDB(b, ctx, "")
	for _, c := range []struct{ name, key, ref, revert string }{
		{"serial", "serial", "int", `
			ALTER TABLE big_parents ALTER COLUMN id TYPE int;
			ALTER TABLE big_children ALTER COLUMN parent_id TYPE int;`},
		{"bigserial", "bigserial", "bigint", ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			// Rows first, then keys, indexes and constraints: a bulk index
			// build and one foreign-key check are far quicker than keeping
			// them up row by row.
			if _, err := db.ExecContext(ctx, fmt.Sprintf(`
				DROP TABLE IF EXISTS big_children, big_parents;
				CREATE TABLE big_parents (id %s, name text NOT NULL);
				INSERT INTO big_parents (name) SELECT 'parent ' || i FROM generate_series(1, %d) i;
				ALTER TABLE big_parents ADD PRIMARY KEY (id);
				CREATE TABLE big_children (id bigserial, parent_id %s NOT NULL, note text);
				INSERT INTO big_children (parent_id, note) SELECT i, 'child' FROM generate_series(1, %d) i;
				ALTER TABLE big_children ADD PRIMARY KEY (id), ADD FOREIGN KEY (parent_id) REFERENCES big_parents (id);
				CREATE INDEX ON big_children (parent_id);`,
				c.key, rows, c.ref, rows)); err != nil {
				b.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "VACUUM ANALYZE big_parents, big_children"); err != nil {
				b.Fatal(err)
			}
			var held time.Duration
			adopted := false
			for b.Loop() {
				b.StopTimer()
				if adopted {
					if _, err := db.ExecContext(ctx, c.revert+`
						ALTER TABLE big_parents ALTER COLUMN id SET DEFAULT nextval('big_parents_id_seq');
						ALTER SEQUENCE big_parents_id_seq OWNED BY big_parents.id;`); err != nil {
						b.Fatal(err)
					}
				}
				plan, err := NewPlan(ctx, db, []string{"big_parents"}, Options{LockTimeout: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := plan.Apply(ctx, db); err != nil {
					b.Fatal(err)
				}
				held += time.Since(start)
				adopted = true
			}
			b.ReportMetric(held.Seconds()/float64(b.N), "lock-s")
		})
	}
}
