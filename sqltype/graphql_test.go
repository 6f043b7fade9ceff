package sqltype

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/snowkeyhq/snowkey/idtype"
)

// The methods by which gqlgen binds a Go type to a GraphQL scalar.
type gqlValue interface {
	MarshalGQL(io.Writer)
}

type gqlInput interface {
	UnmarshalGQL(any) error
}

var (
	_ gqlValue = NullID{}
	_ gqlInput = (*NullID)(nil)
	_ gqlValue = IDs(nil)
	_ gqlInput = (*IDs)(nil)
)

func gql(v gqlValue) string {
	var b strings.Builder
	v.MarshalGQL(&b)
	return b.String()
}

func TestNullIDGQL(t *testing.T) {
	if got := gql(NullID{}); got != "null" {
		t.Errorf("NULL: %s", got)
	}
	if got := gql(NewNullID(1<<53 + 1)); got != `"9007199254740993"` {
		t.Errorf("valid: %s", got)
	}
	n := NewNullID(5)
	if err := n.UnmarshalGQL(nil); err != nil || n.Valid {
		t.Errorf("null: %+v, %v", n, err)
	}
	for _, in := range []any{"9007199254740993", int64(9007199254740993), json.Number("9007199254740993")} {
		var n NullID
		if err := n.UnmarshalGQL(in); err != nil || n != NewNullID(1<<53+1) {
			t.Errorf("UnmarshalGQL(%T %v) = %+v, %v", in, in, n, err)
		}
	}
	for _, tc := range []struct {
		in   any
		kind error
	}{{"x", idtype.ErrSyntax}, {int64(-1), idtype.ErrNegative}, {1.0, idtype.ErrUnsupportedType}, {json.Number("1e3"), idtype.ErrSyntax}} {
		n := NewNullID(5)
		err := n.UnmarshalGQL(tc.in)
		var e *idtype.Error
		if !errors.As(err, &e) || !errors.Is(err, tc.kind) || n != NewNullID(5) {
			t.Errorf("UnmarshalGQL(%T %v) = %v (%+v); want a %v that leaves it alone", tc.in, tc.in, err, n, tc.kind)
		}
	}
}

func TestIDsGQL(t *testing.T) {
	for _, tc := range []struct {
		ids  IDs
		want string
	}{{nil, "null"}, {IDs{}, "[]"}, {IDs{1, 1<<53 + 1, idtype.MaxID}, `["1","9007199254740993","9223372036854775807"]`}} {
		if got := gql(tc.ids); got != tc.want {
			t.Errorf("MarshalGQL(%v) = %s; want %s", tc.ids, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   any
		want IDs
	}{
		{nil, nil},
		{[]any{}, IDs{}},
		{[]any{"1", int64(2), json.Number("9007199254740993")}, IDs{1, 2, 1<<53 + 1}},
		{"7", IDs{7}},           // a single value is a list of one, as GraphQL coerces it
		{[]string{"7"}, IDs{7}}, // gqlparser's coercion of a single variable
		{[]json.Number{"1", "9007199254740993"}, IDs{1, 1<<53 + 1}}, // of a list of numbers read with UseNumber
		{[]int64{3}, IDs{3}},
	} {
		ids := IDs{99}
		if err := ids.UnmarshalGQL(tc.in); err != nil || !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("UnmarshalGQL(%#v) = %#v, %v; want %#v", tc.in, ids, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in     any
		kind   error
		detail string
	}{
		{[]any{"1", nil}, idtype.ErrKind, "element 1"},
		{[]any{"1", "x"}, idtype.ErrSyntax, "element 1"},
		{[]any{2.0}, idtype.ErrUnsupportedType, "element 0"},
		{[]any{[]any{"1"}}, idtype.ErrKind, "element 0"},
		{true, idtype.ErrKind, "element 0"},
		{[]byte("1"), idtype.ErrUnsupportedType, "element 0"}, // bytes, not a list of small IDs
		{[]float64{1}, idtype.ErrUnsupportedType, "element 0"},
	} {
		ids := IDs{99}
		err := ids.UnmarshalGQL(tc.in)
		var e *idtype.Error
		if !errors.As(err, &e) || !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.detail) || !reflect.DeepEqual(ids, IDs{99}) {
			t.Errorf("UnmarshalGQL(%#v) = %v (%v); want a %v naming %s that leaves it alone", tc.in, err, ids, tc.kind, tc.detail)
		}
	}
}

// FuzzIDsUnmarshalGQL reads a JSON value as gqlgen hands over a variable
// (numbers as json.Number) into IDs: no panic; a typed error that leaves
// the IDs alone; or IDs whose every element reads back from what
// MarshalGQL writes.
func FuzzIDsUnmarshalGQL(f *testing.F) {
	for _, s := range []string{`null`, `[]`, `["1",2]`, `[null]`, `[[1]]`, `{}`, `"1"`, `[1.5]`, `["-1"]`, `[1e3]`, `7`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		ids := IDs{99}
		if err := ids.UnmarshalGQL(v); err != nil {
			checkError(t, s, err)
			if !reflect.DeepEqual(ids, IDs{99}) {
				t.Fatalf("failed UnmarshalGQL(%s) changed the value to %v", s, ids)
			}
			return
		}
		var back []string
		if err := json.Unmarshal([]byte(gql(ids)), &back); err != nil || len(back) != len(ids) {
			t.Fatalf("UnmarshalGQL(%s) = %v, written as %s: %v", s, ids, gql(ids), err)
		}
		for i, text := range back {
			if text != ids[i].String() {
				t.Fatalf("element %d of %v written as %q", i, ids, text)
			}
		}
	})
}

func FuzzNullIDUnmarshalGQL(f *testing.F) {
	for _, s := range []string{"1", "", "-1", "x", "9223372036854775808", "007", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range []any{s, json.Number(s)} {
			n := NewNullID(5)
			if err := n.UnmarshalGQL(v); err != nil {
				checkError(t, s, err)
				if n != NewNullID(5) {
					t.Fatalf("failed UnmarshalGQL(%T %q) changed the value to %+v", v, s, n)
				}
				continue
			}
			if !n.Valid || gql(n) != `"`+s+`"` {
				t.Fatalf("UnmarshalGQL(%T %q) = %+v, written as %s", v, s, n, gql(n))
			}
		}
	})
}
