package gormplugin_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// errSourceDown is what failingSource returns once it has failed.
var errSourceDown = errors.New("test source down")

// failingSource serves NextN from a real generator for its first ok
// calls, then fails every call until healed.
type failingSource struct {
	gen    *idtype.Generator
	ok     atomic.Int64
	healed atomic.Bool
}

func (s *failingSource) NextN(dst []idtype.ID) error {
	if !s.healed.Load() && s.ok.Add(-1) < 0 {
		return errSourceDown
	}
	return s.gen.NextN(dst)
}

func (s *failingSource) Next() (idtype.ID, error) {
	var one [1]idtype.ID
	err := s.NextN(one[:])
	return one[0], err
}

func (s *failingSource) Layout() idtype.Layout { return s.gen.Layout() }

// TestCreateInBatchesSourceFails: the Source fails on the second of three
// batches. The failing batch and the ones after it keep zero keys; what the
// first batch leaves depends on the transaction, as the package doc says.
func TestCreateInBatchesSourceFails(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	for _, skip := range []bool{false, true} {
		name := "transaction"
		if skip {
			name = "SkipDefaultTransaction"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, gormplugin.Options{})
			gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
			if err != nil {
				t.Fatal(err)
			}
			src := &failingSource{gen: gen}
			src.ok.Store(1)
			db, err := gorm.Open(e.db.Dialector, &gorm.Config{Logger: e.db.Logger, SkipDefaultTransaction: skip})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Use(gormplugin.New(src, gormplugin.Options{})); err != nil {
				t.Fatal(err)
			}

			const n, batch = 2500, 1000
			cs := make([]Company, n)
			err = db.CreateInBatches(&cs, batch).Error
			if !errors.Is(err, gormplugin.ErrGenerate) || !errors.Is(err, errSourceDown) {
				t.Fatalf("CreateInBatches with a Source failing on batch 2: %v; want ErrGenerate wrapping the Source's error", err)
			}
			for i := batch; i < n; i++ {
				if cs[i].ID != 0 {
					t.Fatalf("struct %d, in the failing batch or after it, holds key %d; want 0", i, cs[i].ID)
				}
			}
			rows := e.keys(t, "companies", "id")
			for i := range batch {
				if cs[i].ID == 0 {
					t.Fatalf("struct %d of the first batch has no key", i)
				}
				if inTable := rows[cs[i].ID]; inTable != skip {
					t.Fatalf("struct %d of the first batch: key %d in the table = %v; want %v", i, cs[i].ID, inTable, skip)
				}
			}
			want := 0
			if skip {
				want = batch // committed batch by batch
			}
			if len(rows) != want {
				t.Fatalf("the table holds %d rows after the failure; want %d", len(rows), want)
			}

			// Finishing the job, as the package doc says: with the
			// transaction the whole slice again, without it the rest.
			src.healed.Store(true)
			rest := cs
			if skip {
				rest = cs[batch:]
			}
			if err := db.CreateInBatches(&rest, batch).Error; err != nil {
				t.Fatalf("CreateInBatches again: %v", err)
			}
			ids := make([]idtype.ID, n)
			for i, c := range cs {
				ids[i] = c.ID
			}
			e.checkKeys(t, "companies", ids...)
		})
	}
}
