package gormplugin

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/snowkeyhq/snowkey/idtype"
)

// FuzzMapKey reads text as a map key in its three spellings (string,
// json.Number, []byte): they agree, an error is an *idtype.Error, and a
// key read back from its decimal is the same key.
func FuzzMapKey(f *testing.F) {
	for _, s := range []string{"", "0", "000", "1", "-5", " 12", "1e3", "1.0", "9223372036854775807",
		"9223372036854775808", "12x", "\u0661"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := mapKey(s)
		for _, v := range []any{json.Number(s), []byte(s)} {
			k2, err2 := mapKey(v)
			if (err == nil) != (err2 == nil) || k.zero != k2.zero || k.id != k2.id {
				t.Fatalf("%q as string: %+v, %v; as %T: %+v, %v", s, k, err, v, k2, err2)
			}
		}
		if err != nil {
			var e *idtype.Error
			if !errors.As(err, &e) {
				t.Fatalf("error for %q is %T (%v), not *idtype.Error", s, err, err)
			}
			return
		}
		if k.id < 0 || (k.zero != (k.id == 0)) {
			t.Fatalf("%q read as %+v", s, k)
		}
		if back, err := mapKey(k.id.String()); err != nil || back.id != k.id {
			t.Fatalf("%q read as %d, whose decimal reads as %+v, %v", s, k.id, back, err)
		}
	})
}
