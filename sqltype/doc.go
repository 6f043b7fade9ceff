// Package sqltype holds the column types that a plain idtype.ID does not
// cover: a nullable ID and a list of IDs.
//
//   - NullID is an ID column that may be NULL: SQL NULL, Valid == false and
//     JSON null are the same thing; a valid ID is written to JSON as a
//     quoted decimal, like idtype.ID.
//   - IDs is a []idtype.ID stored as a PostgreSQL bigint[] and written to
//     JSON as an array of strings (numbers are accepted on input). It is
//     the argument of "= ANY(?)" queries.
//
// Both work the same through the three ways a Go backend reaches
// PostgreSQL: pgx natively (binary int8 and int8[] encodings), pgx's
// database/sql driver (stdlib) and GORM on top of it:
//
//	type Post struct {
//		ID       idtype.ID      `gorm:"primaryKey"`
//		ParentID sqltype.NullID // NULL for a thread's first post
//		Tags     sqltype.IDs    // bigint[]
//	}
//
//	var posts []Post
//	db.Where("id = ANY(?)", sqltype.IDs{a, b, c}).Find(&posts)
//
// With pgx used natively, RegisterPgx on each connection makes bigint
// columns scan into idtype.ID and NullID without an allocation per value.
//
// A value that is not an exact integer never becomes an ID: a float4 or
// float8 column, a binary array of floats or numerics, and a numeric with a
// fraction are refused on every path, where pgx alone would round a whole
// float into an integer. Scans are all or nothing: a scan that fails, on
// any element, leaves the destination as it was.
//
// Bad input never panics. Every error for bad input is an *idtype.Error
// that names the input and wraps one of idtype's sentinels (ErrSyntax,
// ErrRange, ErrNegative, ErrNull, ErrKind, ErrUnsupportedType) or one of
// this package's (ErrArraySyntax, ErrDimensions), so callers match with
// errors.Is whichever package found the problem.
package sqltype
