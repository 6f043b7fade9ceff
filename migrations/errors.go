package migrations

import "errors"

// Errors of this package. Each is wrapped with detail; match with
// errors.Is.
var (
	// ErrInvalidOption means an Option's value cannot work; the error
	// names the option and the value.
	ErrInvalidOption = errors.New("migrations: invalid option")
	// ErrNotMigrated means the database lacks what Up creates: Up has not
	// run on it (or not in the schema the connection's search_path
	// names).
	ErrNotMigrated = errors.New("migrations: database not migrated (run migrations.Up)")
)
