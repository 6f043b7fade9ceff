package gormplugin

import (
	"reflect"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/snowkeyhq/snowkey/idtype"
)

// BenchmarkCallback times the plugin's create callback alone on a batch of
// 1,000 rows (finding the zero keys, one NextN, setting them), with GORM's
// statement prepared as its create path prepares it and no SQL built. It
// reports the cost per row, to set against the cost of inserting a row
// (BenchmarkCreate): on a shared, loaded machine the difference between
// two inserts drowns in noise, while this stays measurable.
func BenchmarkCallback(b *testing.B) {
	type row struct {
		ID    idtype.ID `gorm:"primaryKey"`
		Name  string
		Count int64
	}
	db, err := gorm.Open(postgres.New(postgres.Config{DSN: "host=localhost"}),
		&gorm.Config{DryRun: true, DisableAutomaticPing: true, SkipDefaultTransaction: true, Logger: logger.Discard})
	if err != nil {
		b.Fatal(err)
	}
	// A layout with a 21-bit sequence, so that the generator's ceiling of
	// IDs per millisecond (4,096 with DefaultLayout, 244 ns an ID) does not
	// stand in for the callback's cost.
	wide := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 1, SequenceBits: 21}
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1, Layout: wide})
	if err != nil {
		b.Fatal(err)
	}
	p := New(gen, Options{})
	rows := make([]row, 1000)
	tx := db.Session(&gorm.Session{NewDB: true})
	tx.Statement.Dest = &rows
	if err := tx.Statement.Parse(&rows); err != nil {
		b.Fatal(err)
	}
	tx.Statement.ReflectValue = reflect.ValueOf(&rows).Elem()
	b.ReportAllocs()
	for b.Loop() {
		for i := range rows {
			rows[i].ID = 0
		}
		p.assign(tx)
	}
	if tx.Error != nil || rows[0].ID == 0 {
		b.Fatalf("callback did not fill the keys: %v", tx.Error)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
