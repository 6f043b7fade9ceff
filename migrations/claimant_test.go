package migrations

import (
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/snowkeyhq/snowkey/idtype"
)

// TestParseClaimant: the claimant Up names a server by reads back into
// its parts, whatever the database and schema are called; claimants of
// anything else are not servers'.
func TestParseClaimant(t *testing.T) {
	for _, tc := range []struct {
		id   serverIdentity
		fork string
	}{
		{serverIdentity{system: "7713377699162068996", timeline: 1, database: "app", schema: "public"}, ""},
		{serverIdentity{system: "1", timeline: 12, database: "a/b#c:d", schema: "my schema"}, "0123456789abcdef"},
		{serverIdentity{system: "2", timeline: 3, database: "é", schema: "x#y"}, ""},
	} {
		c := tc.id.claimant(tc.fork, defences{})
		sc, ok := parseClaimant(c)
		want := ServerClaim{Claimant: c, SystemIdentifier: tc.id.system, Timeline: tc.id.timeline,
			Database: tc.id.database, Schema: tc.id.schema, Fork: tc.fork}
		if !ok || sc != want {
			t.Errorf("parseClaimant(%q) = %+v, %v; want %+v", c, sc, ok, want)
		}
	}
	// A claim of before timelines.
	if sc, ok := parseClaimant("postgres:42/app/public"); !ok || sc.Timeline != 0 || sc.SystemIdentifier != "42" || sc.Database != "app" {
		t.Errorf("an old claimant reads as %+v, %v", sc, ok)
	}
	for _, bad := range []string{"", "server-a", "postgres:", "postgres:1", "postgres:1:x/a/b", "postgres:1:0/a/b", "postgres:1:02/a/b", "postgres:1:+2/a/b", "postgres:1/ab"} {
		if sc, ok := parseClaimant(bad); ok {
			t.Errorf("parseClaimant(%q) = %+v; want none", bad, sc)
		}
	}
}

// FuzzParseClaimant: claimants are read from the lease store, which any
// client may write: parseClaimant never panics, and what it reads builds
// the same claimant back.
func FuzzParseClaimant(f *testing.F) {
	for _, s := range []string{"postgres:7713377699162068996:1/app/public", "postgres:1/a/b#0123456789abcdef",
		"postgres::/", "postgres:1:99999999999999999999/a/b", "claim/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, ok := parseClaimant(s)
		if !ok {
			return
		}
		back := claimantPrefix + sc.SystemIdentifier
		if sc.Timeline > 0 {
			back += ":" + strconv.FormatInt(sc.Timeline, 10)
		}
		back += "/" + sc.Database + "/" + sc.Schema
		if sc.Fork != "" {
			back += "#" + sc.Fork
		}
		if back != s || sc.Claimant != s {
			t.Fatalf("%q read as %+v, which builds %q", s, sc, back)
		}
	})
}

// FuzzParseServerBody: a function body is read from the database, where a
// role may have replaced it: parseServerBody never panics, and a record it
// accepts is written into a body that reads back the same.
func FuzzParseServerBody(f *testing.F) {
	rec := serverRecord{Worker: 1021, SystemIdentifier: "7713377699162068996", Timeline: 2, Database: "app",
		Claimant: "postgres:7713377699162068996:2/app/public", Namespace: "api"}
	body, err := serverBody(rec, defences{})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{body, "SELECT 1023::bigint", serverMarker + "{", serverMarker + `{"worker":0}`,
		serverMarker + `{"worker":5,"extra":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, ok, err := parseServerBody(s)
		if !ok || err != nil {
			return
		}
		b, err := serverBody(r, defences{})
		if err != nil {
			return // a database name that holds the body's quote: refused
		}
		back, ok, err := parseServerBody(b)
		if !ok || err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("%q read as %+v; its body reads back as %+v, %v, %v", s, r, back, ok, err)
		}
	})
}

// TestStatusNil: a nil database or pool is a bad option, not a panic.
func TestStatusNil(t *testing.T) {
	if _, err := ServerOf(t.Context(), nil); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("ServerOf(nil) = %v, want ErrInvalidOptions", err)
	}
	if _, err := Servers(t.Context(), nil); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("Servers(nil) = %v, want ErrInvalidOptions", err)
	}
}
