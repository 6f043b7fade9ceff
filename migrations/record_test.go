package migrations

import (
	"strings"
	"testing"
)

func TestParseRecord(t *testing.T) {
	good := []struct {
		in   string
		want spaceRecord
	}{
		{`{"space":"orders","schemas":{"public":1023}}`, spaceRecord{"orders", map[string]int64{"public": 1023}}},
		{` {"space":"a.b-c_1","schemas":{"x y":0,"\"q\"":7}} `, spaceRecord{"a.b-c_1", map[string]int64{"x y": 0, `"q"`: 7}}},
	}
	for _, tc := range good {
		got, err := parseRecord(tc.in)
		if err != nil || got.encode() != tc.want.encode() {
			t.Errorf("parseRecord(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{
		``, `null`, `[]`, `{}`, `{"space":"orders"}`, `{"space":"orders","schemas":{}}`,
		`{"space":"","schemas":{"public":1}}`, `{"space":"a b","schemas":{"public":1}}`,
		`{"space":"o","schemas":{"public":1024}}`, `{"space":"o","schemas":{"public":-1}}`,
		`{"space":"o","schemas":{"":1}}`, `{"space":"o","schemas":{"p":1.5}}`,
		`{"space":"o","schemas":{"p":1},"extra":1}`, `{"space":"o","schemas":{"p":1}} {}`,
	} {
		if r, err := parseRecord(in); err == nil {
			t.Errorf("parseRecord(%s) = %+v; want an error", in, r)
		}
	}
}

// FuzzParseRecord: another database's record is input Up does not control.
// parseRecord never panics, and what it accepts encodes to a record it
// reads back the same; a record's literal in ALTER DATABASE survives any
// schema name.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{`{"space":"orders","schemas":{"public":1023}}`, `{"space":"o","schemas":{"it's":1}}`,
		`{"space":"o","schemas":{"\u0000":1}}`, `{`, `{"space":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseRecord(s)
		if err != nil {
			return
		}
		enc := r.encode()
		back, err := parseRecord(enc)
		if err != nil || back.encode() != enc {
			t.Fatalf("%q read as %+v, which encodes as %s and reads back as %+v, %v", s, r, enc, back, err)
		}
		// The SQL literal: an escape string, which reads back as enc.
		lit := sqlLiteral(enc)
		if !strings.HasPrefix(lit, "E'") || !strings.HasSuffix(lit, "'") || unescape(lit[2:len(lit)-1]) != enc {
			t.Fatalf("literal %s of %q does not read back", lit, enc)
		}
	})
}

func TestCheckSpaceName(t *testing.T) {
	for _, ok := range []string{"a", "orders", "A.b-c_9", strings.Repeat("x", 63)} {
		if err := checkSpaceName(ok); err != nil {
			t.Errorf("checkSpaceName(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a b", "é", "a'b", strings.Repeat("x", 64)} {
		if err := checkSpaceName(bad); err == nil {
			t.Errorf("checkSpaceName(%q) accepted it", bad)
		}
	}
	if freeWorker([]int64{1023, 1022}) != 1021 || freeWorker(nil) != 1023 {
		t.Error("freeWorker does not return the largest free number")
	}
}

// unescape reads the inside of an E” literal as PostgreSQL does for the
// two escapes sqlLiteral writes.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if (s[i] == '\\' || s[i] == '\'') && i+1 < len(s) && s[i+1] == s[i] {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
