package migrations

// SQLSTATE codes of the errors that the time functions of
// 00003_snowflake_time.sql raise (snowflake_time, snowflake_worker,
// snowflake_sequence, snowflake_first_id). With pgx, match them on
// (*pgconn.PgError).Code.
const (
	// SQLStateInvalidID means the function was given an ID of 0 or less:
	// 0 means "not assigned yet", and no snowflake is negative.
	SQLStateInvalidID = "SK003"
	// SQLStateInvalidLayout means the layout given to one of the variants
	// that take (epoch, worker_bits, sequence_bits) is one that
	// idtype.Layout.Validate refuses: a width outside 0..31, fewer than 20
	// time bits, or an epoch before 1970.
	SQLStateInvalidLayout = "SK004"
)
