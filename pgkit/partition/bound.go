package partition

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
)

// bound is one end of a range partition: a key value, or MINVALUE or
// MAXVALUE, which lie below and above every value.
type bound struct {
	inf int8 // -1: MINVALUE, +1: MAXVALUE, 0: v
	v   int64
}

var maxBound = bound{inf: 1}

func finite(id idtype.ID) bound { return bound{v: int64(id)} }

func (a bound) cmp(b bound) int {
	switch {
	case a.inf != b.inf:
		return int(a.inf) - int(b.inf)
	case a.v < b.v:
		return -1
	case a.v > b.v:
		return 1
	}
	return 0
}

// sql is the bound as a partition bound takes it.
func (a bound) sql() string {
	switch a.inf {
	case -1:
		return "MINVALUE"
	case 1:
		return "MAXVALUE"
	}
	return strconv.FormatInt(a.v, 10)
}

func (a bound) String() string { return a.sql() }

// parseBound reads what pg_get_expr(relpartbound) says of a partition of a
// table partitioned by range on one column: "DEFAULT", or
// "FOR VALUES FROM ('1') TO (MAXVALUE)". Anything else (a list or hash
// bound, several key columns, a key that is not an integer) is an error
// wrapping ErrNotPartitioned.
func parseBound(s string) (isDefault bool, lo, hi bound, err error) {
	if s == "DEFAULT" {
		return true, bound{}, bound{}, nil
	}
	rest, ok := strings.CutPrefix(s, "FOR VALUES FROM (")
	var from, to string
	if ok {
		from, rest, ok = strings.Cut(rest, ") TO (")
	}
	if ok {
		to, ok = strings.CutSuffix(rest, ")")
	}
	if !ok {
		return false, lo, hi, fmt.Errorf("%w: partition bound %q is not FOR VALUES FROM (x) TO (y)", ErrNotPartitioned, s)
	}
	if lo, err = parseBoundValue(from); err == nil {
		hi, err = parseBoundValue(to)
	}
	if err != nil {
		return false, lo, hi, fmt.Errorf("%w: partition bound %q: %v", ErrNotPartitioned, s, err)
	}
	if lo.cmp(hi) >= 0 {
		return false, lo, hi, fmt.Errorf("%w: partition bound %q is an empty range", ErrNotPartitioned, s)
	}
	return false, lo, hi, nil
}

// parseBoundValue reads one end: MINVALUE, MAXVALUE, or an integer,
// quoted as pg_get_expr quotes it ('-5') or not.
func parseBoundValue(s string) (bound, error) {
	switch s {
	case "MINVALUE":
		return bound{inf: -1}, nil
	case "MAXVALUE":
		return bound{inf: 1}, nil
	}
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		s = s[1 : len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return bound{}, fmt.Errorf("%q is not one bigint value", s)
	}
	return bound{v: v}, nil
}

// rangeCond is the WHERE clause that picks the keys of col in [lo, hi),
// or "" when both ends are infinite.
func rangeCond(col string, lo, hi bound) string {
	var conds []string
	if lo.inf == 0 {
		conds = append(conds, col+" >= "+lo.sql())
	}
	if hi.inf == 0 {
		conds = append(conds, col+" < "+hi.sql())
	}
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// quoteIdent quotes a column's name as SQL takes it.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }
