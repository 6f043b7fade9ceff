package adopt

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// checkOwners refuses, naming them (ErrColumn), the objects the plan
// changes that the current user may not change: the tables it alters
// (with every partition and child the change reaches), the views,
// policies and triggers it drops and creates again (their tables), the
// functions it drops or replaces and the sequences it detaches or keeps
// need their owner's role (or one that is a member of it); a twin domain,
// a kept sequence and a function made again need CREATE on their schema.
func (b *planner) checkOwners(ctx context.Context) error {
	if b.defences.noOwnerCheck {
		return nil
	}
	var rels, funcs []int64
	var lockNames, seqs, schemas []string
	for _, c := range b.widen {
		for _, m := range c.family {
			rels = append(rels, m.rel)
		}
		rels = append(rels, c.rel)
	}
	for _, t := range b.targets {
		rels = append(rels, t.oid)
		if t.seq != "" {
			seqs = append(seqs, t.seq)
		}
	}
	for _, o := range b.objects {
		switch {
		case o.kind == objFunction:
			funcs = append(funcs, o.oid)
		case o.lock != "":
			lockNames = append(lockNames, o.lock)
		}
	}
	var kept []string
	for _, k := range b.seqs {
		kept = append(kept, k.name)
	}
	for _, tw := range b.twins {
		if !tw.exists {
			schemas = append(schemas, tw.schema)
		}
	}
	refused, err := queryStrings(ctx, b.q, `SELECT format('%s %I.%I (owned by %I)',
			CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' ELSE 'table' END,
			n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner))
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE (c.oid = ANY ($1::int8[]::oid[]) OR c.oid = ANY (SELECT pg_catalog.to_regclass(s)::oid FROM unnest($2::text[]) s))
			AND NOT pg_catalog.pg_has_role(c.relowner, 'USAGE')
		UNION ALL
		SELECT format('function %s (owned by %I)', f.oid::pg_catalog.regprocedure, pg_catalog.pg_get_userbyid(f.proowner))
		FROM pg_catalog.pg_proc f WHERE f.oid = ANY ($4::int8[]::oid[]) AND NOT pg_catalog.pg_has_role(f.proowner, 'USAGE')
		UNION ALL
		SELECT format('schema %I (no CREATE privilege, for a function made again)', n.nspname)
		FROM pg_catalog.pg_proc f JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
		WHERE f.oid = ANY ($4::int8[]::oid[]) AND NOT pg_catalog.has_schema_privilege(n.oid, 'CREATE')
		UNION ALL
		SELECT format('schema %s (no CREATE privilege, for a twin domain)', s)
		FROM unnest($3::text[]) s WHERE NOT pg_catalog.has_schema_privilege(s, 'CREATE')
		UNION ALL
		SELECT format('schema %I (no CREATE privilege, for the copy of an identity''s sequence)', n.nspname)
		FROM unnest($5::text[]) s JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(s)
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE NOT pg_catalog.has_schema_privilege(n.oid, 'CREATE')
		ORDER BY 1`, rels, append(seqs, lockNames...), schemas, funcs, kept)
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		b.refuse(fmt.Errorf("%w: the current user may not change %s: adopt as their owner", ErrColumn,
			strings.Join(slices.Compact(refused), ", ")))
	}
	return nil
}
