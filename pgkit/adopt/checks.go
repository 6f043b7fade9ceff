package adopt

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// checkValues refuses (ErrCheck) a column that will hold snowflakes whose
// CHECK constraints a key of now cannot pass: its domain's (at every level
// of a domain over a domain), and its table's that name it alone (CHECK
// (VALUE <= 2147483647), CHECK (id < 1000000000)). Apply would pass, and
// every insert would then fail with 23514. The constraints are evaluated
// by the database on the first and the last key of the current
// millisecond, of snowflake_id() (unless AppKeys) and of Options.Layout;
// one that fails, or errs, on any of them refuses the column.
func (b *planner) checkValues(ctx context.Context) error {
	if b.defences.noCheckValues {
		return nil
	}
	var keys []int64
	if !b.o.AppKeys {
		keys = append(keys, int64(idtype.DefaultLayout.FirstID(b.dbNow)), int64(idtype.DefaultLayout.LastID(b.dbNow)))
	}
	now := time.Now()
	keys = append(keys, int64(b.o.Layout.FirstID(now)), int64(b.o.Layout.LastID(now)))
	seen := map[string]bool{}
	var refused []string
	for _, c := range b.holderCols {
		rels, nums := []int64{c.rel}, []int64{c.attnum}
		for _, m := range c.family {
			rels, nums = append(rels, m.rel), append(nums, m.attnum)
		}
		rows, err := b.q.QueryContext(ctx, `WITH RECURSIVE chain(typ) AS (
				SELECT a.atttypid FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1 AND a.attnum = $2
				UNION
				SELECT t.typbasetype FROM chain JOIN pg_catalog.pg_type t ON t.oid = chain.typ WHERE t.typtype = 'd')
			SELECT format('constraint %I of domain %s', con.conname, con.contypid::pg_catalog.regtype), 'value',
				pg_catalog.pg_get_constraintdef(con.oid)
			FROM chain JOIN pg_catalog.pg_constraint con ON con.contypid = chain.typ AND con.contype = 'c'
			UNION ALL
			SELECT format('constraint %I of %s', con.conname, con.conrelid::pg_catalog.regclass), a.attname::text,
				pg_catalog.pg_get_constraintdef(con.oid)
			FROM unnest($3::int8[], $4::int8[]) AS f(rel, attnum)
				JOIN pg_catalog.pg_constraint con ON con.conrelid = f.rel::oid AND con.contype = 'c' AND con.conkey = ARRAY[f.attnum]::int2[]
				JOIN pg_catalog.pg_attribute a ON a.attrelid = f.rel::oid AND a.attnum = f.attnum
			ORDER BY 1`, c.rel, c.attnum, rels, nums)
		if err != nil {
			return fmt.Errorf("adopt: constraints of %s: %w", c, err)
		}
		type check struct{ name, value, def string }
		var checks []check
		for rows.Next() {
			var k check
			if err := rows.Scan(&k.name, &k.value, &k.def); err != nil {
				rows.Close()
				return err
			}
			checks = append(checks, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, k := range checks {
			if seen[k.name] {
				continue
			}
			seen[k.name] = true
			fails, err := b.failsOn(ctx, k.def, k.value, keys)
			if err != nil {
				return err
			}
			if fails != "" {
				refused = append(refused, fmt.Sprintf("%s, %s, on %s (%s)", k.name, k.def, c, fails))
			}
		}
	}
	if len(refused) > 0 {
		b.refuse(fmt.Errorf("%w: a snowflake of now cannot pass these: %s: change them before adopting", ErrCheck,
			strings.Join(refused, "; ")))
	}
	return nil
}

// failsOn evaluates the CHECK constraint def with each of keys in place of
// name (VALUE for a domain's, else the column, by its name), and returns
// which key fails it and how, or "". Each evaluation runs under a
// savepoint, so that one that errs (integer out of range) leaves the
// transaction as it was.
func (b *planner) failsOn(ctx context.Context, def, name string, keys []int64) (string, error) {
	toks, err := lex(def)
	if err != nil || len(toks) < 3 || !toks[0].is("check") || !toks[1].isPunct("(") {
		return fmt.Sprintf("adopt cannot read it: %s", def), nil
	}
	c := closing(toks, 1)
	if c < 0 {
		return fmt.Sprintf("adopt cannot read it: %s", def), nil
	}
	var edits []edit
	for _, t := range toks[2:c] {
		if t.isName() && t.val == name && (t.kind == tokQuoted || name == "value" || strings.ToLower(name) == name) {
			edits = append(edits, edit{t.pos - toks[2].pos, t.end - toks[2].pos, "($1::bigint)"})
		}
	}
	expr := applyEdits(def[toks[2].pos:toks[c-1].end], edits)
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if _, err := b.q.ExecContext(ctx, "SAVEPOINT adopt_check"); err != nil {
			return "", fmt.Errorf("adopt: %w", err)
		}
		var pass bool
		err := b.q.QueryRowContext(ctx, "SELECT ("+expr+") IS NOT FALSE", k).Scan(&pass)
		if _, rerr := b.q.ExecContext(ctx, "ROLLBACK TO SAVEPOINT adopt_check"); rerr != nil {
			return "", fmt.Errorf("adopt: %w", rerr)
		}
		switch {
		case err != nil:
			return fmt.Sprintf("key %d: %v", k, err), nil
		case !pass:
			return fmt.Sprintf("key %d fails it", k), nil
		}
	}
	return "", nil
}
