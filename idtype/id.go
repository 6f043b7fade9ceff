package idtype

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// ID is a 64-bit Snowflake ID. The zero value means "not assigned yet":
// generators never issue it, and gormplugin fills it in before an insert.
// A valid ID is never negative.
//
// An ID carries every encoding a backend needs: decimal text (String, Parse,
// MarshalText), JSON as a quoted decimal so JavaScript clients keep every
// digit (MarshalText, UnmarshalJSON), database/sql and pgx (Scan, Value)
// and GORM's column type (GormDataType).
//
// Each ID has one spelling: its decimal digits without a sign or leading
// zeros, as String writes it, and every decoder (Parse, UnmarshalText,
// UnmarshalJSON, Scan of text) accepts that and nothing else. IDs go into
// URLs and cache keys, where "007" and "7" would be two keys for one row.
type ID int64

// MaxID is the largest ID, 2^63-1.
const MaxID ID = math.MaxInt64

// Parse reads an ID written as a decimal integer, as String writes it.
//
// It accepts the canonical spelling only: digits, without a sign, spaces,
// a fraction, an exponent, underscores or leading zeros ("0" itself is
// fine; "007" is refused, "leading zero at offset 0"), so that one ID has
// one spelling in URLs and cache keys. The error is an *Error that names
// the input and wraps ErrEmpty, ErrSyntax, ErrNegative or ErrRange.
func Parse(s string) (ID, error) {
	id, err := parseDigits(s)
	if err != nil {
		return 0, &Error{Op: "parse", Input: quoteInput(s), Err: err}
	}
	return id, nil
}

// parseDigits is Parse without the error wrapping, shared by every decoder
// so that all of them accept and refuse exactly the same inputs. It takes a
// string or a byte slice without converting either, so decoders that start
// from []byte do not allocate.
func parseDigits[T string | []byte](s T) (ID, error) {
	if len(s) == 0 {
		return 0, ErrEmpty
	}
	if s[0] == '-' {
		if len(s) > 1 && allDigits(s[1:]) {
			return 0, ErrNegative
		}
		return 0, fmt.Errorf("%w: sign '-' at offset 0", ErrSyntax)
	}
	if len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9' {
		// "007" would be a second spelling of ID 7 (see ID).
		return 0, fmt.Errorf("%w: leading zero at offset 0", ErrSyntax)
	}
	var n uint64
	overflow := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			// Junk is reported before size: "99999999999999999999x" is a
			// syntax error, not a big number.
			return 0, fmt.Errorf("%w: %s", ErrSyntax, describeByte(c, i))
		}
		switch {
		case overflow:
		case n > math.MaxInt64/10:
			overflow = true
		default:
			n = n*10 + uint64(c-'0')
			overflow = n > math.MaxInt64
		}
	}
	if overflow {
		return 0, ErrRange
	}
	return ID(n), nil
}

func allDigits[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// describeByte names a byte that is not a digit and where it stands, with
// a word for the mistakes people really make.
func describeByte(c byte, at int) string {
	var what string
	switch c {
	case ' ', '\t', '\n', '\r':
		what = "space"
	case '+', '-':
		what = "sign"
	case '.':
		what = "fraction"
	case 'e', 'E':
		what = "exponent"
	default:
		return fmt.Sprintf("byte %q at offset %d", c, at)
	}
	return fmt.Sprintf("%s %q at offset %d", what, c, at)
}

// String returns the ID in decimal, the form Parse reads.
func (id ID) String() string {
	return strconv.FormatInt(int64(id), 10)
}

// Int64 returns the ID as an int64.
func (id ID) Int64() int64 { return int64(id) }

// IsZero reports whether the ID is the zero value, "not assigned yet".
func (id ID) IsZero() bool { return id == 0 }

// Time returns when the ID was generated, decoded with DefaultLayout. IDs
// made with another Layout are decoded with that layout's Decode.
func (id ID) Time() time.Time {
	ms := int64(uint64(id)&math.MaxInt64) >> (defaultWorkerBits + defaultSequenceBits)
	return time.UnixMilli(twitterEpochMs + ms).UTC()
}
