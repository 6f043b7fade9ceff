package gormplugin_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// TestCreateMapsZeroSpellings: a map names a key that is not assigned yet
// in many ways besides nil and idtype.ID(0). Each is treated as unassigned
// and filled, as the struct path fills a zero key: no row gets key 0.
func TestCreateMapsZeroSpellings(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	var zeroID idtype.ID
	var zeroInt int64
	spellings := []any{
		&zeroID, new(idtype.ID), (*idtype.ID)(nil), &zeroInt,
		"0", "", json.Number("0"), json.Number(""), []byte("0"),
		int(0), int32(0), uint64(0), float64(0),
		sqltype.NullID{}, sqltype.NewNullID(0), sql.NullInt64{}, sql.NullInt64{Valid: true},
	}
	for i, zero := range spellings {
		t.Run(fmt.Sprintf("%d %T %v", i, zero, zero), func(t *testing.T) {
			m := map[string]any{"id": zero, "name": fmt.Sprint("zero ", i)}
			if err := e.db.Model(&Company{}).Create(m).Error; err != nil {
				t.Fatalf("create: %v", err)
			}
			var got idtype.ID
			switch v := m["id"].(type) {
			case idtype.ID:
				got = v
			case *idtype.ID: // filled through the caller's pointer
				got = *v
			case *int64:
				got = idtype.ID(*v)
			default:
				t.Fatalf("the map holds %#v after the create; want the key", m["id"])
			}
			if got == 0 || idtype.DefaultLayout.Decode(got).Worker != 1 {
				t.Errorf("key %d; want one from the plugin (worker 1)", got)
			}
			var n int
			if err := e.sql.QueryRow("SELECT count(*) FROM companies WHERE id = $1 AND name = $2", got, m["name"]).Scan(&n); err != nil || n != 1 {
				t.Errorf("row with key %d: %d, %v", got, n, err)
			}
		})
	}
	if e.keys(t, "companies", "id")[0] {
		t.Error("a row has key 0")
	}
}

// TestCreateMapsKeyText: a key given as text is read strictly, as
// idtype.Parse reads it; junk, signs, floats and other kinds fail the
// create with ErrKeyValue and write nothing, where PostgreSQL would have
// cast some of them ("-5", " 12", 1.5) into a key.
func TestCreateMapsKeyText(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	for _, tc := range []struct {
		in   any
		want idtype.ID
	}{
		{"123456", 123456},
		{json.Number("9007199254740993"), 1<<53 + 1},
		{[]byte("77"), 77},
	} {
		m := map[string]any{"id": tc.in, "name": fmt.Sprint(tc.in)}
		if err := e.db.Model(&Company{}).Create(m).Error; err != nil {
			t.Errorf("create with key %#v: %v", tc.in, err)
			continue
		}
		if m["id"] != tc.want {
			t.Errorf("key %#v: the map holds %#v; want idtype.ID(%d)", tc.in, m["id"], tc.want)
		}
		if !e.keys(t, "companies", "id")[tc.want] {
			t.Errorf("key %#v: no row with key %d", tc.in, tc.want)
		}
	}
	before := len(e.keys(t, "companies", "id"))
	// "007" and "000": an ID has one spelling, its digits without
	// leading zeros (idtype.Parse), in a map as everywhere else.
	for _, junk := range []any{"007", "000", "12x", "-5", " 12", "1e3", "1.0", json.Number("-1"), "99999999999999999999",
		float64(1.5), float64(2124962550683529217), true, int64(-5), int(-1), uint64(1 << 63), idtype.ID(-3)} {
		m := map[string]any{"id": junk, "name": "junk"}
		err := e.db.Model(&Company{}).Create(m).Error
		var ie *idtype.Error
		if !errors.Is(err, gormplugin.ErrKeyValue) || !errors.As(err, &ie) {
			t.Errorf("create with key %#v: %v; want ErrKeyValue wrapping an *idtype.Error", junk, err)
		}
	}
	if after := len(e.keys(t, "companies", "id")); after != before {
		t.Errorf("creates with junk keys wrote %d rows", after-before)
	}
}
