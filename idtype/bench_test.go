package idtype

import (
	"encoding/json"
	"testing"

	"github.com/snowkeyhq/snowkey/internal/bench/benchpair"
)

// The generator benchmarks that compare with other libraries live in the
// bench module (bench/), which keeps those libraries out of this go.mod.
// These measure the encodings and the generator on its own.

func BenchmarkNext(b *testing.B) {
	g, err := NewGenerator(GeneratorOptions{Worker: 1})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := g.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendText(b *testing.B) {
	buf := make([]byte, 0, 32)
	id := ID(2116681624581046272)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = id.AppendText(buf[:0])
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("2116681624581046272"); err != nil {
			b.Fatal(err)
		}
	}
}

// jsonIDs and jsonInt64s are the same record, with ID fields and with the
// int64 ",string" fields a hand-written model would use to keep
// JavaScript clients exact.
type jsonIDs struct {
	ID       ID     `json:"id"`
	AuthorID ID     `json:"author_id"`
	ParentID ID     `json:"parent_id"`
	Title    string `json:"title"`
}

type jsonInt64s struct {
	ID       int64  `json:"id,string"`
	AuthorID int64  `json:"author_id,string"`
	ParentID int64  `json:"parent_id,string"`
	Title    string `json:"title"`
}

// BenchmarkJSON runs with encoding/json as built; BenchmarkJSONv2 runs
// the same with GOEXPERIMENT=jsonv2, where encoding/json uses
// MarshalJSONTo and UnmarshalJSONFrom.
func BenchmarkJSON(b *testing.B) { benchJSON(b) }

func benchJSON(b *testing.B) {
	ids := jsonIDs{ID: 2116681624581046272, AuthorID: 2116681624581046273, ParentID: 2116681624581046274, Title: "hello"}
	ints := jsonInt64s{ID: 2116681624581046272, AuthorID: 2116681624581046273, ParentID: 2116681624581046274, Title: "hello"}
	data, _ := json.Marshal(ints)
	b.Run("marshal/ID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&ids); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal/int64-string", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&ints); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The paired runs time both sides in every op (see internal/bench/benchpair):
	// on a noisy machine two separate runs do not compare within 20%.
	b.Run("marshal/paired", func(b *testing.B) {
		tx, ty := benchpair.Times(b, func() { _, _ = json.Marshal(&ids) }, func() { _, _ = json.Marshal(&ints) })
		b.ReportMetric(tx.Seconds()/ty.Seconds(), "ID/int64-string")
	})
	b.Run("unmarshal/paired", func(b *testing.B) {
		var v jsonIDs
		var w jsonInt64s
		tx, ty := benchpair.Times(b, func() { _ = json.Unmarshal(data, &v) }, func() { _ = json.Unmarshal(data, &w) })
		b.ReportMetric(tx.Seconds()/ty.Seconds(), "ID/int64-string")
	})
	b.Run("unmarshal/ID", func(b *testing.B) {
		b.ReportAllocs()
		var v jsonIDs
		for b.Loop() {
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/int64-string", func(b *testing.B) {
		b.ReportAllocs()
		var v jsonInt64s
		for b.Loop() {
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSystemClock is the cost of one reading of the default clock.
func BenchmarkSystemClock(b *testing.B) {
	c := SystemClock()
	for b.Loop() {
		c.UnixNano()
	}
}
