package adopt

import (
	"fmt"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// DefaultLockTimeout is how long Apply waits for each lock when
// Options.LockTimeout is zero.
const DefaultLockTimeout = 5 * time.Second

// Options configures NewPlan. The zero value adopts with snowflake_id() as
// the keys' default, waits at most DefaultLockTimeout for each lock, and
// checks the existing keys against the keys of idtype.DefaultLayout.
type Options struct {
	// AppKeys drops the keys' sequence and identity defaults instead of
	// replacing them with snowflake_id(): every insert must then bring its
	// key, as GORM with gormplugin does. Zero means DEFAULT
	// snowflake_id(), so raw SQL inserts get snowflakes too.
	AppKeys bool
	// LockTimeout bounds how long Apply waits for each of its locks
	// (PostgreSQL's lock_timeout, set for the transaction). While it
	// waits, every other query on the table queues behind it; when it
	// runs out, Apply fails with ErrLock and changes nothing. Zero
	// means DefaultLockTimeout (5 s). A negative value is an error, and
	// so is one under 1ms, lock_timeout's unit.
	LockTimeout time.Duration
	// Layout is the layout of the keys the app will bring (its
	// generator's, which gormplugin uses): every existing key must be below
	// its FirstID of now. The keys snowflake_id() makes are checked too,
	// unless AppKeys: they are always of idtype.DefaultLayout, on the
	// database's clock. Zero means idtype.DefaultLayout.
	Layout idtype.Layout
	// AllowTriggers names BEFORE INSERT row triggers of the tables that
	// the caller has read and vouches leave the key alone, each as
	// table.trigger or schema.table.trigger (the table found as the
	// tables are): adopt refuses every other such trigger that it cannot
	// prove leaves the key alone (ErrTrigger), since one that sets it
	// would go on overriding snowflake_id(). A name that is no such
	// trigger is refused too. Zero means none.
	AllowTriggers []string
}

// check returns o with its defaults, or an error wrapping
// idtype.ErrInvalidOptions that names the bad field.
func (o Options) check() (Options, error) {
	switch {
	case o.LockTimeout < 0:
		return o, fmt.Errorf("%w: adopt.Options.LockTimeout %v is negative", idtype.ErrInvalidOptions, o.LockTimeout)
	case o.LockTimeout == 0:
		o.LockTimeout = DefaultLockTimeout
	case o.LockTimeout < time.Millisecond:
		return o, fmt.Errorf("%w: adopt.Options.LockTimeout %v is under 1ms", idtype.ErrInvalidOptions, o.LockTimeout)
	}
	if o.Layout.IsZero() {
		o.Layout = idtype.DefaultLayout
	} else if err := o.Layout.Validate(); err != nil {
		return o, fmt.Errorf("%w: adopt.Options.Layout: %w", idtype.ErrInvalidOptions, err)
	}
	return o, nil
}
