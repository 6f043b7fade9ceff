package idtype

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMarshalJSON(t *testing.T) {
	for _, id := range boundaryIDs {
		b, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		if want := `"` + id.String() + `"`; string(b) != want {
			t.Errorf("json.Marshal(%d) = %s; want %s", id, b, want)
		}
		var back ID
		if err := json.Unmarshal(b, &back); err != nil || back != id {
			t.Errorf("json.Unmarshal(%s) = %d, %v; want %d", b, back, err, id)
		}
	}
}

// TestMarshalJSONIsText: ID has no MarshalJSON, so that encoding/json v1
// writes it through MarshalText, which it quotes without re-scanning (see
// json.go); TestMarshalJSON and TestJSONInStructs check the bytes.
func TestMarshalJSONIsText(t *testing.T) {
	if _, ok := any(ID(0)).(json.Marshaler); ok {
		t.Error("ID implements json.Marshaler: encoding/json would re-scan every ID it writes")
	}
	if _, ok := any(new(ID)).(json.Marshaler); ok {
		t.Error("*ID implements json.Marshaler: encoding/json would re-scan every ID it writes")
	}
}

func TestUnmarshalJSON(t *testing.T) {
	good := []struct {
		in   string
		want ID
	}{
		{`"123"`, 123},
		{`123`, 123},
		{`0`, 0},
		{`"0"`, 0},
		{`"9007199254740993"`, 1<<53 + 1},
		{`9007199254740993`, 1<<53 + 1}, // read as text, never through float64
		{`"9223372036854775807"`, MaxID},
		{`9223372036854775807`, MaxID},
		{`"\u0031\u0032"`, 12}, // escaped digits are still digits
	}
	for _, tc := range good {
		id := ID(42)
		if err := json.Unmarshal([]byte(tc.in), &id); err != nil || id != tc.want {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d", tc.in, id, err, tc.want)
		}
	}

	bad := []struct {
		in   string
		want error
	}{
		{`""`, ErrEmpty},
		{`" 1"`, ErrSyntax},
		{`"1 "`, ErrSyntax},
		{`"+1"`, ErrSyntax},
		{`"-1"`, ErrNegative},
		{`-1`, ErrNegative},
		{`1.5`, ErrSyntax},
		{`1.0`, ErrSyntax},
		{`"1.5"`, ErrSyntax},
		{`1e3`, ErrSyntax},
		{`1E+3`, ErrSyntax},
		{`"1e3"`, ErrSyntax},
		{`9223372036854775808`, ErrRange},
		{`"9223372036854775808"`, ErrRange},
		{`true`, ErrKind},
		{`false`, ErrKind},
		{`{}`, ErrKind},
		{`[1]`, ErrKind},
		{`"null"`, ErrSyntax},
		{`"abc"`, ErrSyntax},
	}
	for _, tc := range bad {
		id := ID(42)
		err := json.Unmarshal([]byte(tc.in), &id)
		if !errors.Is(err, tc.want) {
			t.Errorf("Unmarshal(%s) error %v; want one wrapping %v", tc.in, err, tc.want)
		}
		if id != 42 {
			t.Errorf("Unmarshal(%s) changed the ID to %d on error", tc.in, id)
		}
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), "unmarshal JSON") {
			t.Errorf("Unmarshal(%s) error %q is not an *Error naming the operation", tc.in, err)
		}
	}
}

func TestUnmarshalJSONDirect(t *testing.T) {
	// Called directly, not through encoding/json, the method must still
	// refuse what encoding/json would never hand it, without panicking.
	for _, in := range []string{"", `"`, `"12`, `n`, `nul`, `x`, ` `, "\x00"} {
		id := ID(42)
		if err := id.UnmarshalJSON([]byte(in)); err == nil || id != 42 {
			t.Errorf("UnmarshalJSON(%q) = %d, %v; want an error and no change", in, id, err)
		}
	}
}

func TestUnmarshalJSONNullKeepsValue(t *testing.T) {
	id := ID(42)
	if err := json.Unmarshal([]byte(`null`), &id); err != nil || id != 42 {
		t.Errorf("Unmarshal(null) = %d, %v; want 42 unchanged, as encoding/json does for null", id, err)
	}
}

type jsonRecord struct {
	ID       ID          `json:"id"`
	AuthorID ID          `json:"author_id"`
	Parent   *ID         `json:"parent"`
	Tags     map[ID]bool `json:"tags"`
	Many     []ID        `json:"many"`
}

func TestJSONInStructs(t *testing.T) {
	parent := ID(1<<53 + 1)
	in := jsonRecord{ID: MaxID, AuthorID: 7, Parent: &parent, Tags: map[ID]bool{99: true}, Many: []ID{1, 1<<60 + 3}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"9223372036854775807","author_id":"7","parent":"9007199254740993","tags":{"99":true},"many":["1","1152921504606846979"]}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	var out jsonRecord
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != in.ID || out.AuthorID != in.AuthorID || *out.Parent != parent || !out.Tags[99] || out.Many[1] != in.Many[1] {
		t.Errorf("round trip = %+v; want %+v", out, in)
	}
	var nulls jsonRecord
	if err := json.Unmarshal([]byte(`{"id":null,"parent":null}`), &nulls); err != nil || nulls.ID != 0 || nulls.Parent != nil {
		t.Errorf("nulls = %+v, %v; want zero ID and nil pointer", nulls, err)
	}
	if err := json.Unmarshal([]byte(`{"tags":{"x":true}}`), &nulls); !errors.Is(err, ErrSyntax) {
		t.Errorf("a map key that is not an ID gave %v; want ErrSyntax", err)
	}
}

func TestText(t *testing.T) {
	for _, id := range boundaryIDs {
		b, err := id.MarshalText()
		if err != nil || string(b) != id.String() {
			t.Errorf("MarshalText(%d) = %s, %v", id, b, err)
		}
		var back ID
		if err := back.UnmarshalText(b); err != nil || back != id {
			t.Errorf("UnmarshalText(%s) = %d, %v", b, back, err)
		}
		buf := []byte("id=")
		buf, _ = id.AppendText(buf)
		if string(buf) != "id="+id.String() {
			t.Errorf("AppendText = %s", buf)
		}
	}
	for _, tc := range badInputs {
		id := ID(42)
		err := id.UnmarshalText([]byte(tc.in))
		if !errors.Is(err, tc.want) || id != 42 {
			t.Errorf("UnmarshalText(%q) = %d, %v; want %v and no change", tc.in, id, err, tc.want)
		}
	}
}

func TestAppendTextAllocs(t *testing.T) {
	buf := make([]byte, 0, 64)
	id := MaxID
	if n := testing.AllocsPerRun(100, func() { buf, _ = id.AppendText(buf[:0]) }); n != 0 {
		t.Errorf("AppendText allocates %v times; want 0", n)
	}
	b := []byte(`"9223372036854775807"`)
	if n := testing.AllocsPerRun(100, func() { _ = id.UnmarshalJSON(b) }); n != 0 {
		t.Errorf("UnmarshalJSON allocates %v times; want 0", n)
	}
}
