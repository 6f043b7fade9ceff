package partition

// Switches for the package's own tests; users cannot reach them. Each
// Without… switch turns one defence off, for the control run that shows
// the defence is needed.

// SetDatabaseClock makes p's Maintain read the database's time from the
// SQL expression expr, such as a one-row table a test sets, instead of
// statement_timestamp(): the tests' way to move the database's clock.
func SetDatabaseClock(p *Table, expr string) { p.nowSQL = expr }

// WithoutLock makes p's Maintain take no advisory lock.
func WithoutLock(p *Table) { p.defences.noLock = true }

// WithoutMove makes p's Maintain create partitions without first moving
// their rows out of the default partition.
func WithoutMove(p *Table) { p.defences.noMove = true }

// WithoutRefCheck makes p's Maintain move rows that other rows refer to
// with a DELETE and an INSERT in the session's own replication role,
// firing the foreign keys' actions.
func WithoutRefCheck(p *Table) { p.defences.noRefCheck = true }

// WithoutTriggerGuard makes p's Maintain move rows with the user's
// triggers enabled.
func WithoutTriggerGuard(p *Table) { p.defences.noTriggerGuard = true }

// WithoutDatabaseClock makes p's Maintain decide on the app's clock
// (Options.Clock) instead of the database's.
func WithoutDatabaseClock(p *Table) { p.defences.appClock = true }

// WithoutDetach makes p's Maintain drop expired partitions without
// detaching them first.
func WithoutDetach(p *Table) { p.defences.plainDrop = true }

// WithoutKeepCheck makes p's Maintain remove expired partitions without
// looking for rows that refer to theirs.
func WithoutKeepCheck(p *Table) { p.defences.noKeepCheck = true }

// WithoutSkip makes p's Maintain end with an error at the first period it
// cannot finish, leaving the steps after it undone.
func WithoutSkip(p *Table) { p.defences.stopAtLeft = true }

// WithoutRowSecurityOff makes p's Maintain read what it decides on under
// the session's row_security (on), under which the policies of
// row-level security filter the reads, instead of off, under which
// PostgreSQL refuses a read they would filter.
func WithoutRowSecurityOff(p *Table) { p.defences.filtered = true }

// WithoutAccessErrors makes p's Maintain return PostgreSQL's refusal of
// a read or lock as it comes, naming neither the table nor what the role
// lacks (ErrRowSecurity, ErrPrivilege), and report nothing in Left or
// Kept for it.
func WithoutAccessErrors(p *Table) { p.defences.rawRefusals = true }

// WithoutLockOrder makes p's Maintain lock the table alone, leaving the
// locks of the tables that refer to it to the statements that need them,
// under LockTimeout.
func WithoutLockOrder(p *Table) { p.defences.parentFirst = true }
