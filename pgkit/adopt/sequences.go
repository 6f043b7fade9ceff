package adopt

import (
	"context"
	"fmt"
)

// keptSequence is an identity's sequence, which DROP IDENTITY drops: the
// plan keeps it, as it keeps a serial key's, by copying it (its type,
// bounds, increment, cache and cycle, its current value, owner, comment
// and privileges) under a name of its own before the identity goes, and
// giving the copy the sequence's name after.
type keptSequence struct {
	name   string // the identity's sequence, schema-qualified
	rel    string // its name alone, quoted as needed
	temp   string // the copy's name until the identity is dropped
	create []string
	after  []string // the rename, owner, comment and privileges
}

// keepSequences works out the copy of each identity key's sequence.
func (b *planner) keepSequences(ctx context.Context) error {
	if b.defences.dropIdentitySequence {
		return nil
	}
	for _, t := range b.targets {
		if !t.identity || t.seq == "" {
			continue
		}
		k := &keptSequence{name: t.seq}
		var oid int64
		var def, owner, comment string
		var taken bool
		err := b.q.QueryRowContext(ctx, `SELECT c.oid::int8, quote_ident(c.relname), format('%I.%I', n.nspname, left(c.relname, 50) || '_adopt_copy'),
				to_regclass(format('%I.%I', n.nspname, left(c.relname, 50) || '_adopt_copy')) IS NOT NULL,
				format('AS %s INCREMENT BY %s MINVALUE %s MAXVALUE %s START WITH %s CACHE %s %s', pg_catalog.format_type(s.seqtypid, NULL),
					s.seqincrement, s.seqmin, s.seqmax, s.seqstart, s.seqcache, CASE WHEN s.seqcycle THEN 'CYCLE' ELSE 'NO CYCLE' END),
				CASE WHEN c.relowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN ''
					ELSE quote_ident(pg_catalog.pg_get_userbyid(c.relowner)) END,
				coalesce(pg_catalog.obj_description(c.oid, 'pg_class'), '')
			FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
				JOIN pg_catalog.pg_sequence s ON s.seqrelid = c.oid
			WHERE c.oid = pg_catalog.to_regclass($1)`, t.seq).Scan(&oid, &k.rel, &k.temp, &taken, &def, &owner, &comment)
		if err != nil {
			return fmt.Errorf("adopt: sequence %s: %w", t.seq, err)
		}
		if taken {
			b.refuse(fmt.Errorf("%w: %s: the identity's sequence %s is kept by copying it first to %s, a name that is taken: rename that",
				ErrColumn, t.name, t.seq, k.temp))
			continue
		}
		k.create = []string{
			"CREATE SEQUENCE " + k.temp + " " + def,
			fmt.Sprintf("SELECT pg_catalog.setval(%s::pg_catalog.regclass, s.last_value, s.is_called) FROM %s s", literal(k.temp), t.seq),
		}
		k.after = []string{fmt.Sprintf("ALTER SEQUENCE %s RENAME TO %s", k.temp, k.rel)}
		if owner != "" {
			k.after = append(k.after, fmt.Sprintf("ALTER SEQUENCE %s OWNER TO %s", t.seq, owner))
		}
		if comment != "" {
			k.after = append(k.after, fmt.Sprintf("COMMENT ON SEQUENCE %s IS %s", t.seq, literal(comment)))
		}
		grants, err := b.grants(ctx, "pg_class", oid, "SEQUENCE "+t.seq)
		if err != nil {
			return err
		}
		k.after = append(k.after, grants...)
		b.seqs = append(b.seqs, k)
	}
	return nil
}
