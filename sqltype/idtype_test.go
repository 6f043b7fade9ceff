package sqltype_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"math"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// boundaryIDs are the IDs at the edges a bigint column and a JSON
// number meet.
var boundaryIDs = []idtype.ID{0, 1, 1<<53 - 1, 1 << 53, 1<<53 + 1, 1288834974657 << 22, math.MaxInt64 - 1, math.MaxInt64}

// TestPostgresRoundTrip checks idtype.ID by itself, without this
// package's types or RegisterPgx: it lives here, not in package idtype,
// whose tests use the standard library alone so that a module importing
// only idtype needs no other module, not even in its go.sum.
//
// It writes IDs to a real bigint column and reads them
// back through pgx's native interface (binary int8, through Scan and
// Value) and through database/sql on pgx's stdlib driver (Scan and
// Value), and reads NULL and negative values from the database as errors.
func TestPostgresRoundTrip(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	url := testenv.Postgres(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := conn.Exec(ctx, "CREATE TABLE ids (n int PRIMARY KEY, id bigint)"); err != nil {
		t.Fatal(err)
	}

	for i, id := range boundaryIDs {
		if i%2 == 0 {
			_, err = conn.Exec(ctx, "INSERT INTO ids VALUES ($1, $2)", i, id)
		} else {
			_, err = db.ExecContext(ctx, "INSERT INTO ids VALUES ($1, $2)", i, id)
		}
		if err != nil {
			t.Fatalf("insert %d: %v", id, err)
		}
	}
	for i, want := range boundaryIDs {
		var native, stdlib, text idtype.ID
		if err := conn.QueryRow(ctx, "SELECT id FROM ids WHERE n = $1", i).Scan(&native); err != nil || native != want {
			t.Errorf("pgx native read %d: %d, %v", want, native, err)
		}
		if err := db.QueryRowContext(ctx, "SELECT id FROM ids WHERE n = $1", i).Scan(&stdlib); err != nil || stdlib != want {
			t.Errorf("database/sql read %d: %d, %v", want, stdlib, err)
		}
		// The simple protocol sends rows as text.
		if err := conn.QueryRow(ctx, "SELECT id FROM ids WHERE n = $1", pgx.QueryExecModeSimpleProtocol, i).Scan(&text); err != nil || text != want {
			t.Errorf("pgx text read %d: %d, %v", want, text, err)
		}
	}

	for _, tc := range []struct {
		query string
		want  error
	}{
		{"SELECT NULL::bigint", idtype.ErrNull},
		{"SELECT -5::bigint", idtype.ErrNegative},
	} {
		id := idtype.ID(42)
		if err := conn.QueryRow(ctx, tc.query).Scan(&id); !errors.Is(err, tc.want) || id != 42 {
			t.Errorf("pgx native %s: %d, %v; want %v and no change", tc.query, id, err, tc.want)
		}
		id = 42
		if err := db.QueryRowContext(ctx, tc.query).Scan(&id); !errors.Is(err, tc.want) || id != 42 {
			t.Errorf("database/sql %s: %d, %v; want %v and no change", tc.query, id, err, tc.want)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO ids VALUES (99, $1)", idtype.ID(-1)); !errors.Is(err, idtype.ErrNegative) {
		t.Errorf("writing ID(-1) through pgx: %v; want ErrNegative", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO ids VALUES (99, $1)", idtype.ID(-1)); !errors.Is(err, idtype.ErrNegative) {
		t.Errorf("writing ID(-1) through database/sql: %v; want ErrNegative", err)
	}
}
