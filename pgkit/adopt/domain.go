package adopt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// domain is the domain a column is of.
type domain struct {
	oid  int64
	name string // schema-qualified, quoted as needed
	base string // its base type, as format_type prints it
	def  string // its default expression, "" for none
}

// twin is a domain over bigint with the default and constraints of a
// domain over smallint or integer. PostgreSQL cannot change a domain's
// base type, so a column of such a domain is widened to its twin, named
// as the domain with _bigint added, in its schema: the column keeps every
// constraint the domain gave it. Columns of the domain that hold no keys
// keep the domain.
type twin struct {
	of     *domain
	name   string // schema-qualified, quoted as needed
	schema string // the schema's name, unquoted
	// exists says the twin was made already (by an earlier adoption),
	// with the same default and constraints.
	exists bool
	create []string // CREATE DOMAIN, then constraints, comment, owner, privileges
}

// domainShape is what a twin must copy of a domain.
type domainShape struct {
	base        string
	notNull     bool
	def         string
	constraints []string // ADD CONSTRAINT clauses, sorted
}

// readTwins works out the twin of the domain of every column to widen
// that is of a domain over smallint or integer.
func (b *planner) readTwins(ctx context.Context) error {
	b.twinOf = map[int64]*twin{}
	if b.defences.noDomains {
		return nil
	}
	for _, c := range b.widen {
		if c.domain == nil || b.twinOf[c.domain.oid] != nil {
			continue
		}
		tw, err := b.readTwin(ctx, c.domain)
		if err != nil {
			if !errors.Is(err, ErrColumn) {
				return err
			}
			b.refuse(err)
			continue
		}
		b.twinOf[c.domain.oid] = tw
		b.twins = append(b.twins, tw)
	}
	return nil
}

// readTwin works out d's twin, or refuses (ErrColumn) when a type of the
// twin's name exists and is not that twin.
func (b *planner) readTwin(ctx context.Context, d *domain) (*twin, error) {
	q := b.q
	tw := &twin{of: d}
	var typname, comment, owner string
	err := q.QueryRowContext(ctx, `SELECT n.nspname, t.typname, coalesce(pg_catalog.obj_description(t.oid, 'pg_type'), ''),
			CASE WHEN t.typowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN ''
				ELSE quote_ident(pg_catalog.pg_get_userbyid(t.typowner)) END
		FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = $1`, d.oid).Scan(
		&tw.schema, &typname, &comment, &owner)
	if err != nil {
		return nil, fmt.Errorf("adopt: domain %s: %w", d.name, err)
	}
	const suffix = "_bigint"
	if len(typname)+len(suffix) > 63 {
		return nil, fmt.Errorf("%w: domain %s: its twin over bigint, %s%s, would pass PostgreSQL's 63 bytes: rename the domain",
			ErrColumn, d.name, typname, suffix)
	}
	if err := q.QueryRowContext(ctx, "SELECT format('%I.%I', $1::text, $2::text)", tw.schema, typname+suffix).Scan(&tw.name); err != nil {
		return nil, fmt.Errorf("adopt: domain %s: %w", d.name, err)
	}
	want, err := readShape(ctx, q, d.oid)
	if err != nil {
		return nil, err
	}
	var existing int64
	if err := q.QueryRowContext(ctx, "SELECT coalesce(pg_catalog.to_regtype($1)::oid, 0)::int8", tw.name).Scan(&existing); err != nil {
		return nil, fmt.Errorf("adopt: domain %s: %w", d.name, err)
	}
	if existing != 0 {
		got, err := readShape(ctx, q, existing)
		if err != nil {
			return nil, err
		}
		want.base = "bigint"
		if got.base != want.base || got.notNull != want.notNull || got.def != want.def || !slices.Equal(got.constraints, want.constraints) {
			return nil, fmt.Errorf("%w: domain %s must be widened to a twin over bigint, %s, and a type of that name exists "+
				"that is not one (base %s, default %q, not null %v, constraints %q): rename it", ErrColumn, d.name, tw.name,
				got.base, got.def, got.notNull, got.constraints)
		}
		tw.exists = true
		return tw, nil
	}
	create := "CREATE DOMAIN " + tw.name + " AS bigint"
	if want.def != "" {
		create += " DEFAULT " + want.def
	}
	if want.notNull {
		create += " NOT NULL"
	}
	tw.create = append(tw.create, create)
	for _, c := range want.constraints {
		tw.create = append(tw.create, "ALTER DOMAIN "+tw.name+" ADD "+c)
	}
	if comment != "" {
		tw.create = append(tw.create, fmt.Sprintf("COMMENT ON DOMAIN %s IS %s", tw.name, literal(comment)))
	}
	if owner != "" {
		tw.create = append(tw.create, fmt.Sprintf("ALTER DOMAIN %s OWNER TO %s", tw.name, owner))
	}
	grants, err := b.grants(ctx, "pg_type", d.oid, "DOMAIN "+tw.name)
	if err != nil {
		return nil, err
	}
	tw.create = append(tw.create, grants...)
	return tw, nil
}

// readShape reads the base type, NOT NULL, default and constraints of
// domain oid, the constraints' definitions as PostgreSQL prints them
// (schema-qualified under the plan's pinned search_path).
func readShape(ctx context.Context, q querier, oid int64) (domainShape, error) {
	var s domainShape
	err := q.QueryRowContext(ctx, `SELECT pg_catalog.format_type(t.typbasetype, NULL), t.typnotnull,
			coalesce(pg_catalog.pg_get_expr(t.typdefaultbin, 0), '')
		FROM pg_catalog.pg_type t WHERE t.oid = $1 AND t.typtype = 'd'`, oid).Scan(&s.base, &s.notNull, &s.def)
	if err != nil {
		return s, fmt.Errorf("adopt: domain %d: %w", oid, err)
	}
	s.constraints, err = queryStrings(ctx, q, `SELECT format('CONSTRAINT %I ', c.conname) || pg_catalog.pg_get_constraintdef(c.oid)
		FROM pg_catalog.pg_constraint c WHERE c.contypid = $1 AND c.contype = 'c' ORDER BY 1`, oid)
	if err != nil {
		return s, err
	}
	for i, c := range s.constraints {
		s.constraints[i] = strings.TrimSpace(c)
	}
	return s, nil
}
