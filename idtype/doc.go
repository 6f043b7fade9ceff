// Package idtype is the 64-bit Snowflake ID value and the generator that
// issues it.
//
// An ID is an int64 made of a millisecond timestamp, a worker number and a
// per-millisecond sequence (see Layout for the bits). IDs issued later sort
// higher, so they make good primary keys: inserts land at the right edge
// of a B-tree index, and a time range is a key range (Layout.FirstID).
//
// The ID type carries every encoding a Go backend needs: decimal text,
// JSON as a quoted string (JavaScript numbers lose digits above 2^53),
// database/sql (which pgx uses too) and GORM's column type, and the
// package depends on the standard library alone. Each ID has one
// spelling, its decimal digits without leading zeros, and every decoder
// accepts that alone. Bad input to any decoder is an *Error that names the
// input and wraps one sentinel (ErrSyntax, ErrRange, ...); nothing panics.
//
// A Generator issues IDs for one worker number without locks, never
// repeats itself and never goes backwards in time, whatever the wall
// clock does:
//
//	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
//	if err != nil {
//		return err
//	}
//	id, err := gen.Next()
//
// Two generators must never share a worker number and layout. In a fleet,
// lease the number instead of configuring it: package workerid leases it
// from Redis or PostgreSQL and builds the generator on the lease,
//
//	gen, err := lease.NewGenerator()
//
// which is a gated generator (NewGatedGenerator): it issues only what the
// lease grants through its Gate, and stops when the lease is lost. Every
// package that needs IDs takes a Source, which both kinds satisfy.
//
// # Options
//
// NewGenerator takes one GeneratorOptions struct by value, the way every
// snowkey constructor takes one options struct: the zero value of each
// field is the default its doc names, and a bad value is an error wrapping
// ErrInvalidOptions, the one sentinel for bad options in all of snowkey's
// packages, that names the field and the value.
package idtype
