// Package idtype is the 64-bit Snowflake ID value and the generator that
// issues it.
package idtype
