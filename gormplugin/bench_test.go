package gormplugin_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The three models of the benchmarks: the same row, with a key filled by
// the plugin, a key set by hand, and a bigserial key.
type (
	PluginRow struct {
		ID        idtype.ID `gorm:"primaryKey"`
		Name      string
		Count     int64
		CreatedAt time.Time
	}
	ManualRow struct {
		ID        idtype.ID `gorm:"primaryKey"`
		Name      string
		Count     int64
		CreatedAt time.Time
	}
	SerialRow struct {
		ID        int64 `gorm:"primaryKey"`
		Name      string
		Count     int64
		CreatedAt time.Time
	}
)

// benchDBs opens one fresh database twice: with the plugin and without.
func benchDBs(b *testing.B) (withPlugin, plain *gorm.DB, gen *idtype.Generator) {
	b.Helper()
	url := testenv.Postgres(b)
	sqlDB, err := sql.Open("pgx", url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sqlDB.Close() })
	open := func() *gorm.DB {
		db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
		if err != nil {
			b.Fatal(err)
		}
		return db
	}
	gen, err = idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	if err != nil {
		b.Fatal(err)
	}
	withPlugin, plain = open(), open()
	if err := withPlugin.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		b.Fatal(err)
	}
	if err := plain.AutoMigrate(&PluginRow{}, &ManualRow{}, &SerialRow{}); err != nil {
		b.Fatal(err)
	}
	return withPlugin, plain, gen
}

// BenchmarkCreate inserts rows through GORM on real PostgreSQL, in batches
// of 1,000 (one INSERT per create) and one by one (one INSERT, in GORM's
// default transaction, per create), three ways:
//
//   - plugin: keys filled by the plugin;
//   - manual: the same model without the plugin, keys set by hand with
//     one NextN per create, as an app would without it;
//   - bigserial: GORM's usual int64 key from a sequence, read back with
//     RETURNING.
//
// The machine is shared and its load drifts by a factor of two within
// seconds, so the three are measured paired: each op runs one create of
// each, in an order that rotates from op to op, and times each. It
// reports each one's rows/s ("plugin-rows/s", ...) and the ratios of the
// plugin's rows/s to the others' ("plugin/manual", "plugin/bigserial"),
// taken over the same seconds. ns/op is the time of all three creates.
func BenchmarkCreate(b *testing.B) {
	withPlugin, plain, gen := benchDBs(b)
	for _, size := range []int{1000, 1} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			pluginRows := make([]PluginRow, size)
			manualRows := make([]ManualRow, size)
			serialRows := make([]SerialRow, size)
			ids := make([]idtype.ID, size)
			variants := []struct {
				name   string
				table  string
				create func() error
			}{
				{"plugin", "plugin_rows", func() error {
					for i := range pluginRows {
						pluginRows[i] = PluginRow{Name: "row", Count: int64(i)}
					}
					return withPlugin.Create(&pluginRows).Error
				}},
				{"manual", "manual_rows", func() error {
					if err := gen.NextN(ids); err != nil {
						return err
					}
					for i := range manualRows {
						manualRows[i] = ManualRow{ID: ids[i], Name: "row", Count: int64(i)}
					}
					return plain.Create(&manualRows).Error
				}},
				{"bigserial", "serial_rows", func() error {
					for i := range serialRows {
						serialRows[i] = SerialRow{Name: "row", Count: int64(i)}
					}
					return plain.Create(&serialRows).Error
				}},
			}
			for _, v := range variants {
				truncate(b, plain, v.table)
			}
			spent := make([]time.Duration, len(variants))
			b.ReportAllocs()
			op := 0
			for b.Loop() {
				for k := range variants {
					v := (op + k) % len(variants)
					start := time.Now()
					if err := variants[v].create(); err != nil {
						b.Fatal(err)
					}
					spent[v] += time.Since(start)
				}
				op++
			}
			rows := float64(size) * float64(b.N)
			for i, v := range variants {
				b.ReportMetric(rows/spent[i].Seconds(), v.name+"-rows/s")
			}
			b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "plugin/manual")
			b.ReportMetric(spent[2].Seconds()/spent[0].Seconds(), "plugin/bigserial")
		})
	}
}

func truncate(b *testing.B, db *gorm.DB, table string) {
	b.Helper()
	if err := db.Exec("TRUNCATE " + table).Error; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAssign measures the plugin's own work on a batch of 1,000
// rows, without a database: GORM's dry run builds the INSERT and sends
// nothing. Each op builds one batch with the plugin and one with keys set
// by hand (one NextN, as an app would), in alternating order, and reports
// the ratio of their times ("plugin/manual") and the plugin's extra time
// per row ("extra-ns/row"), which may come out negative when it is below
// the noise.
func BenchmarkAssign(b *testing.B) {
	withPlugin, plain := dryRun(), dryRun()
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := withPlugin.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		b.Fatal(err)
	}
	const size = 1000
	pluginRows := make([]PluginRow, size)
	manualRows := make([]ManualRow, size)
	ids := make([]idtype.ID, size)
	build := []func() error{
		func() error {
			for i := range pluginRows {
				pluginRows[i] = PluginRow{Name: "row", Count: int64(i)}
			}
			return withPlugin.Create(&pluginRows).Error
		},
		func() error {
			if err := gen.NextN(ids); err != nil {
				return err
			}
			for i := range manualRows {
				manualRows[i] = ManualRow{ID: ids[i], Name: "row", Count: int64(i)}
			}
			return plain.Create(&manualRows).Error
		},
	}
	var spent [2]time.Duration
	b.ReportAllocs()
	op := 0
	for b.Loop() {
		for k := range 2 {
			v := (op + k) % 2
			start := time.Now()
			if err := build[v](); err != nil {
				b.Fatal(err)
			}
			spent[v] += time.Since(start)
		}
		op++
	}
	b.ReportMetric(spent[0].Seconds()/spent[1].Seconds(), "plugin/manual")
	b.ReportMetric(float64(spent[0]-spent[1])/float64(size*b.N), "extra-ns/row")
}
