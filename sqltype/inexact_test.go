package sqltype_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// inexactQueries are columns that are not exact integers. A float8 holds
// 53 bits of mantissa, so 2124962550683529217 comes back as
// 2124962550683529216: a different ID, off by one. Every one must be
// refused, even 3::float8, whose value happens to be whole: a float column
// says nothing about whether the integer it once held survived.
//
// One thing no Scan can see: through database/sql an array arrives as its
// text, and a whole float below 10^15 prints as plain digits ({5}), the
// same text as a bigint[]. Its digits are then exactly the float's value,
// so reading it as that ID loses nothing; larger floats print with an
// exponent and are refused.
var inexactQueries = []struct {
	name, sql string
	into      string // "id", "null" or "ids"
	// mention is what the error must name: the value as it arrived (a
	// float's exact digits, or the text of an array), or for a binary
	// array, whose element type is refused before any value is read, that
	// type.
	mention []string
}{
	{"float8 snowflake", "SELECT 2124962550683529217::float8", "id", []string{"float64(2124962550683529216)"}},
	{"float8 whole", "SELECT 3::float8", "id", []string{"float64(3)"}},
	{"float4", "SELECT 16777217::float4", "id", []string{"float64(16777216)", "float32(16777216)"}},
	{"numeric fraction", "SELECT 2124962550683529217.5::numeric", "id", []string{`"2124962550683529217.5"`}},
	{"float8 NullID", "SELECT 2124962550683529217::float8", "null", []string{"float64(2124962550683529216)"}},
	{"numeric NullID", "SELECT 1.5::numeric", "null", []string{`"1.5"`}},
	{"float8[] IDs", "SELECT ARRAY[2124962550683529217::float8]", "ids", []string{"array of float8", "2.1249625506835292e+18"}},
	{"float4[] IDs", "SELECT ARRAY[16777217::float4]", "ids", []string{"array of float4", "1.6777216e+07"}},
	{"numeric[] IDs", "SELECT ARRAY[7, 1.5]::numeric[]", "ids", []string{"array of numeric", `"1.5"`}},
}

// inexactPaths are the ways a value is read: pgx native with its binary
// and its text (simple protocol) formats, each with and without
// sqltype.RegisterPgx, pgx's database/sql driver, and GORM.
var inexactPaths = []string{"pgx binary", "pgx text", "pgx registered binary", "pgx registered text", "stdlib", "gorm"}

// TestInexactNeverBecomesID: a value that is not an exact integer never
// becomes an ID. Each read fails with an *idtype.Error that names the
// value and says it came from a floating-point or fractional column, and
// the destination keeps what it held.
func TestInexactNeverBecomesID(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := openPaths(t)
	for _, q := range inexactQueries {
		for _, path := range inexactPaths {
			t.Run(q.name+"/"+path, func(t *testing.T) {
				dest, before := inexactDest(q.into)
				var err error
				switch path {
				case "pgx binary":
					err = p.pgx.QueryRow(t.Context(), q.sql).Scan(dest)
				case "pgx text":
					err = p.pgx.QueryRow(t.Context(), q.sql, pgx.QueryExecModeSimpleProtocol).Scan(dest)
				case "pgx registered binary":
					err = p.reg.QueryRow(t.Context(), q.sql).Scan(dest)
				case "pgx registered text":
					err = p.reg.QueryRow(t.Context(), q.sql, pgx.QueryExecModeSimpleProtocol).Scan(dest)
				case "stdlib":
					err = p.sql.QueryRowContext(t.Context(), q.sql).Scan(dest)
				case "gorm":
					err = p.gorm.Raw(q.sql).Row().Scan(dest)
				}
				if err == nil {
					t.Fatalf("%s read into %T: %v, no error", q.sql, dest, reflect.ValueOf(dest).Elem())
				}
				var e *idtype.Error
				if !errors.As(err, &e) {
					t.Errorf("error %q is not an *idtype.Error", err)
				} else if !containsAny(e.Error(), q.mention) {
					t.Errorf("error %q names none of %q", err, q.mention)
				}
				if got := reflect.ValueOf(dest).Elem().Interface(); !reflect.DeepEqual(got, before) {
					t.Errorf("a failed read changed the destination from %v to %v", before, got)
				}
			})
		}
	}
}

// inexactDest returns a scan destination holding a value, and that value.
func inexactDest(into string) (dest, value any) {
	switch into {
	case "null":
		n := sqltype.NewNullID(42)
		return &n, n
	case "ids":
		ids := sqltype.IDs{42, 43}
		return &ids, sqltype.IDs{42, 43}
	default:
		id := idtype.ID(42)
		return &id, id
	}
}

// TestFailedScanLeavesIDs: an array scan that fails on an element leaves
// the destination as it was, on every path, instead of half filled.
func TestFailedScanLeavesIDs(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := openPaths(t)
	for _, tc := range []struct {
		sql  string
		want error
	}{
		{"SELECT '{1,NULL,3}'::bigint[]", idtype.ErrNull},
		{"SELECT '{1,2,-3}'::bigint[]", idtype.ErrNegative},
		{"SELECT '{{1,2},{3,4}}'::bigint[]", sqltype.ErrDimensions},
	} {
		for _, path := range inexactPaths {
			t.Run(fmt.Sprintf("%s/%s", tc.sql, path), func(t *testing.T) {
				ids := sqltype.IDs{42, 43}
				var err error
				switch path {
				case "pgx binary":
					err = p.pgx.QueryRow(t.Context(), tc.sql).Scan(&ids)
				case "pgx text":
					err = p.pgx.QueryRow(t.Context(), tc.sql, pgx.QueryExecModeSimpleProtocol).Scan(&ids)
				case "pgx registered binary":
					err = p.reg.QueryRow(t.Context(), tc.sql).Scan(&ids)
				case "pgx registered text":
					err = p.reg.QueryRow(t.Context(), tc.sql, pgx.QueryExecModeSimpleProtocol).Scan(&ids)
				case "stdlib":
					err = p.sql.QueryRowContext(t.Context(), tc.sql).Scan(&ids)
				case "gorm":
					err = p.gorm.Raw(tc.sql).Row().Scan(&ids)
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("error %v; want one wrapping %q", err, tc.want)
				}
				if !reflect.DeepEqual(ids, sqltype.IDs{42, 43}) {
					t.Errorf("a failed scan left %v in the destination; want [42 43] unchanged", ids)
				}
			})
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
