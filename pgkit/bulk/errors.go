package bulk

import "errors"

// Errors of Create and CreateSeq. Each is wrapped with detail that names
// the model, and where there is one the field and the row; match with
// errors.Is. Whatever the error, but ErrCommitUnknown, the load wrote
// nothing, and the structs are as they were before it: it runs in one
// transaction (or one savepoint of Options.Tx), rolled back on any
// failure, and puts back what it wrote into the structs (the package
// documentation says which). Errors from PostgreSQL itself, such as a unique or foreign-key
// violation, come back wrapped with the table they hit, and
// errors.As(err, new(*pgconn.PgError)) finds the server's error. Bad
// options wrap idtype.ErrInvalidOptions instead, the one sentinel of every
// snowkey constructor.
var (
	// ErrModel means the input cannot be bulk loaded: it is not a struct
	// or a pointer to one, GORM cannot parse the model, the row is a nil
	// pointer, or db carries Select or Omit, which bulk loads do not take.
	ErrModel = errors.New("bulk: cannot load")
	// ErrHooks means a model of the load (the input's or an
	// association's) has GORM create hooks (BeforeSave, BeforeCreate,
	// AfterCreate, AfterSave), which bulk loads do not call. Set
	// Options.SkipHooks to load it without them.
	ErrHooks = errors.New("bulk: model has create hooks, which bulk loads do not call")
	// ErrEncode means a field's value cannot be encoded for its column, as
	// pgx would refuse it in a db.Create: the error names the model, the
	// field, the column and the row (its index in the input, then the
	// associations that lead to it), and wraps pgx's own error.
	ErrEncode = errors.New("bulk: value cannot be encoded for its column")
	// ErrKey means a row that other rows refer to has no key and the load
	// cannot give it one: its key is left to the database (a serial or
	// identity column, a `default:` tag), so no foreign key could point at
	// it before it is written.
	ErrKey = errors.New("bulk: row that others refer to has no key")
	// ErrConn means the load cannot reach a pgx connection through db: db
	// runs in a database/sql transaction (inside db.Transaction), whose
	// connection database/sql does not expose, or its connection pool is
	// not pgx's database/sql driver. Pass a pgx.Tx in Options.Tx.
	ErrConn = errors.New("bulk: no pgx connection to copy through")
	// ErrGenerate means the Source failed to issue the IDs a batch needed;
	// the error also wraps the Source's own error.
	ErrGenerate = errors.New("bulk: generate IDs")
	// ErrCommitUnknown means the load's own transaction sent its COMMIT
	// and got no answer (the connection broke, or ctx ended, while it
	// ran): the rows may be written or not. Unlike every other error, it
	// leaves in the structs the keys the load filled, so that a retry of
	// the same structs, if the rows are there, fails on their keys (23505)
	// instead of writing them a second time under new ones. Look one of
	// them up to know; if it is not there, build the structs afresh
	// before loading them again. The error also wraps the connection's
	// own error. A load in Options.Tx never returns it: the caller
	// commits.
	ErrCommitUnknown = errors.New("bulk: COMMIT got no answer; the rows may be written")
)
