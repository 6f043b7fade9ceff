package idtype_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

func ExampleNewGenerator() {
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		panic(err)
	}
	a, _ := gen.Next()
	b, _ := gen.Next()
	fmt.Println(a < b, idtype.DefaultLayout.Decode(b).Worker)
	// Output: true 7
}

// An owner of a worker number for a limited time (a lease; package
// workerid does this for you) drives a gated generator through its Gate:
// the generator issues only within what the latest Grant allows.
func ExampleNewGatedGenerator() {
	gen, gate, err := idtype.NewGatedGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		panic(err)
	}
	_, err = gen.Next()
	fmt.Println(errors.Is(err, idtype.ErrLeaseExpired)) // no grant yet

	gate.Grant(idtype.Grant{Until: time.Now().Add(time.Minute)})
	id, err := gen.Next()
	fmt.Println(idtype.DefaultLayout.Decode(id).Worker, err)

	// The lease is gone: the generator stops for good, and Grant returns
	// the time of its last ID, for the lease to leave in its store.
	last := gate.Grant(idtype.Grant{Err: fmt.Errorf("%w: closed", idtype.ErrLeaseLost)})
	_, err = gen.Next()
	fmt.Println(errors.Is(err, idtype.ErrLeaseLost), last.Equal(idtype.DefaultLayout.Decode(id).Time))
	// Output:
	// true
	// 7 <nil>
	// true true
}

func ExampleGenerator_NextN() {
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	if err != nil {
		panic(err)
	}
	// One reservation for the whole batch, as gormplugin does for a slice.
	batch := make([]idtype.ID, 1000)
	if err := gen.NextN(batch); err != nil {
		panic(err)
	}
	fmt.Println(batch[0] < batch[999])
	// Output: true
}

func ExampleParse() {
	id, err := idtype.Parse("1541815603606036480")
	fmt.Println(id, err)

	_, err = idtype.Parse("1.5e3")
	fmt.Println(errors.Is(err, idtype.ErrSyntax))
	fmt.Println(err)

	// One spelling per ID: "/posts/007" is not post 7.
	_, err = idtype.Parse("007")
	fmt.Println(err)
	// Output:
	// 1541815603606036480 <nil>
	// true
	// idtype: parse "1.5e3": not a decimal integer: fraction '.' at offset 1
	// idtype: parse "007": not a decimal integer: leading zero at offset 0
}

// encoding/json writes an ID as a quoted decimal (through MarshalText), so
// JavaScript clients keep every digit, and reads it back from a string or
// a number.
func ExampleID_UnmarshalJSON() {
	type Post struct {
		ID       idtype.ID `json:"id"`
		AuthorID idtype.ID `json:"author_id"`
	}
	b, _ := json.Marshal(Post{ID: 1541815603606036480, AuthorID: 9007199254740993})
	fmt.Println(string(b))

	// Clients may send IDs back as strings or as numbers.
	var p Post
	err := json.Unmarshal([]byte(`{"id":"1541815603606036480","author_id":9007199254740993}`), &p)
	fmt.Println(p.ID, p.AuthorID, err)
	// Output:
	// {"id":"1541815603606036480","author_id":"9007199254740993"}
	// 1541815603606036480 9007199254740993 <nil>
}

func ExampleLayout_Decode() {
	p := idtype.DefaultLayout.Decode(1541815603606036480)
	fmt.Println(p.Time.Format(time.RFC3339Nano), p.Worker, p.Sequence)
	// Output: 2022-06-28T16:07:40.105Z 378 0
}

func ExampleLayout_FirstID() {
	// All rows created on 2026-11-01 (UTC), by key alone:
	//   SELECT ... WHERE id >= $1 AND id < $2
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	from := idtype.DefaultLayout.FirstID(day)
	to := idtype.DefaultLayout.FirstID(day.AddDate(0, 0, 1))
	fmt.Println(from, to)
	// Output: 2116681624581046272 2117044012446646272
}

// The classic split of the worker number into a 5-bit datacenter and a
// 5-bit worker is the default layout with the number built from both.
func ExampleLayout_datacenterAndWorker() {
	layout := idtype.DefaultLayout // 41 time / 10 worker / 12 sequence bits
	datacenter, worker := int64(3), int64(17)
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Layout: layout, Worker: datacenter<<5 | worker})
	if err != nil {
		panic(err)
	}
	id, _ := gen.Next()
	w := layout.Decode(id).Worker
	fmt.Println(w>>5, w&31)
	// Output: 3 17
}

// A 3-bit machine, 5-bit process and 2-bit clock-back split, as some
// generators use: the clock-back bits let a generator whose clock stepped
// back carry on under another bit pattern. An idtype.Generator never lets
// its time go backwards, so those bits are better spent on the sequence:
// the same 8 bits of machine and process with a 14-bit sequence.
func ExampleLayout_machineProcessClockBack() {
	classic := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 10, SequenceBits: 12}
	machine, process, clockBack := int64(5), int64(9), int64(0)
	fmt.Println(classic.Validate(), machine<<7|process<<2|clockBack)

	better := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 8, SequenceBits: 14}
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Layout: better, Worker: machine<<5 | process})
	if err != nil {
		panic(err)
	}
	id, _ := gen.Next()
	fmt.Println(better.Decode(id).Worker>>5, better.Decode(id).Worker&31, better.MaxSequence()+1)
	// Output:
	// <nil> 676
	// 5 9 16384
}

// gqlgen binds GraphQL's ID scalar to idtype.ID through these two
// methods: an ID goes out as a string and comes in from a string or an
// exact integer.
func ExampleID_UnmarshalGQL() {
	var id idtype.ID
	for _, in := range []any{"9007199254740993", int64(42), json.Number("1e3"), 1.5} {
		if err := id.UnmarshalGQL(in); err != nil {
			fmt.Println(err)
			continue
		}
		var out strings.Builder
		id.MarshalGQL(&out)
		fmt.Println(out.String())
	}
	// Output:
	// "9007199254740993"
	// "42"
	// idtype: unmarshal GraphQL "1e3": not a decimal integer: exponent 'e' at offset 1
	// idtype: unmarshal GraphQL float64(1.5): unsupported source type: floating point cannot carry an ID exactly; send IDs as strings
}
