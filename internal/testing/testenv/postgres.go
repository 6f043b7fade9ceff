package testenv

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Postgres creates an empty database for t alone on the server named by
// SNOWKEY_TEST_POSTGRES and returns its URL, the server's URL with the
// database name in place. The database is dropped when the test ends, even
// if connections to it are still open (DROP DATABASE … WITH (FORCE)).
//
// Without SNOWKEY_TEST_POSTGRES the test is skipped, or fails when CI=true.
func Postgres(t testing.TB) string {
	t.Helper()
	base := lookup(t, EnvPostgres, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("testenv: %s=%q is not a postgres:// URL", EnvPostgres, base)
	}

	// Lower-case letters, digits and '_' need no quoting and stay within
	// PostgreSQL's 63-byte limit on names: "t_" + 40 + "_" + 8.
	name := "t_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(sanitize(t.Name(), 40))) +
		"_" + randomHex(t, 4)
	ident := pgx.Identifier{name}.Sanitize()

	exec := func(sql string) error {
		ctx, cancel := cleanupContext()
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE DATABASE " + ident); err != nil {
		t.Fatalf("testenv: create database %s on %s: %v", name, u.Redacted(), err)
	}
	t.Cleanup(func() {
		if err := exec("DROP DATABASE IF EXISTS " + ident + " WITH (FORCE)"); err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
		}
	})

	db := *u
	db.Path = "/" + name
	db.RawPath = ""
	return db.String()
}
