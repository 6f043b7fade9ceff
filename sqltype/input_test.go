package sqltype

import (
	"errors"
	"strings"
	"testing"

	"github.com/snowkeyhq/snowkey/idtype"
)

// TestInputLikeIdtype keeps this package's rendering of bad input the
// same as idtype's, so an *idtype.Error's Input reads alike whichever
// package made it.
func TestInputLikeIdtype(t *testing.T) {
	long := strings.Repeat("7", 100) + "x"
	var e *idtype.Error
	if _, err := idtype.Parse(long); !errors.As(err, &e) {
		t.Fatalf("idtype.Parse(%q) = %v; want an *idtype.Error", long, err)
	}
	for _, in := range []any{long, []byte(long)} {
		if got := describeInput(in); got != e.Input {
			t.Errorf("describeInput(%T) = %s; idtype says %s", in, got, e.Input)
		}
	}
	var id idtype.ID
	for _, v := range []any{1.5, []string{long}} {
		if err := id.Scan(v); !errors.As(err, &e) {
			t.Fatalf("Scan(%T) = %v; want an *idtype.Error", v, err)
		}
		if got := describeInput(v); got != e.Input {
			t.Errorf("describeInput(%T) = %s; idtype says %s", v, got, e.Input)
		}
	}
}
