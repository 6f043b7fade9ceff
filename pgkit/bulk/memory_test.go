package bulk

import (
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// BulkWide is a row of about 400 bytes.
type BulkWide struct {
	ID   idtype.ID `gorm:"primaryKey"`
	Text string
	N    int64
}

// TestBulkMemoryBound streams 200,000 rows of 400 bytes (80 MB) through
// CreateSeq in batches of 1,000: the load never keeps more than 24 MB
// alive (peakHeap), whatever the stream's length. The control reads the whole stream
// before loading it, as one batch, and goes far past the bound.
func TestBulkMemoryBound(t *testing.T) {
	ctx := testenv.Deadline(t, 3*time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, &BulkWide{})
	const rows, bound = 200000, 24 << 20
	stream := func(yield func(*BulkWide) bool) {
		for i := range rows {
			// A fresh string each row, as rows read from a file are.
			if !yield(&BulkWide{Text: strings.Repeat("x", 400), N: int64(i)}) {
				return
			}
		}
	}
	for _, control := range []bool{false, true} {
		var res Result
		peak, err := peakHeap(func() error {
			var err error
			res, err = createSeqWithout(ctx, db, gen, iter.Seq[*BulkWide](stream), Options{BatchSize: 1000}, defences{unbounded: control})
			return err
		})
		if err != nil || res.Rows != rows {
			t.Fatalf("control=%v: %+v, %v", control, res, err)
		}
		t.Logf("control=%v: at most %.1f MB kept alive above the start", control, float64(peak)/(1<<20))
		switch {
		case !control && peak > bound:
			t.Errorf("the load kept %.1f MB alive; want at most %d MB", float64(peak)/(1<<20), bound>>20)
		case control && peak <= bound:
			t.Errorf("control: reading the whole stream first kept only %.1f MB alive: the test does not reach the fault",
				float64(peak)/(1<<20))
		}
		if err := db.Exec("TRUNCATE bulk_wides").Error; err != nil {
			t.Fatal(err)
		}
	}
}
