package adopt

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// plan writes the statements of what the steps found, in the order Apply
// runs them:
//
//  1. drop what PostgreSQL will not carry across the change of type
//     (objects, those that need others last);
//  2. copy each identity's sequence, drop the identities, and give each
//     copy its sequence's name;
//  3. make the twins of domains over integer;
//  4. widen the columns, one ALTER TABLE a table, so that each is
//     rewritten once, on the topmost parent;
//  5. set the keys' defaults, detach serial sequences;
//  6. create again what was dropped, and replace the functions whose
//     variables alone change (objects, those needed by others first);
//  7. refresh the materialized views that were populated.
func (b *planner) plan() *Plan {
	w := &planWriter{p: &Plan{o: b.o, defences: b.defences, names: b.names, fn: b.fn}, locks: map[string]bool{}}
	// Apply plans again under its own search_path: the triggers allowed
	// by their qualified names.
	w.p.o.AllowTriggers = slices.Sorted(maps.Keys(b.allowed))
	for _, step := range []func(*planWriter){
		b.dropObjects,    // 1
		b.dropIdentities, // 2
		b.makeTwins,      // 3
		b.widenColumns,   // 4
		b.setDefaults,    // 5
		b.createObjects,  // 6
		b.refreshViews,   // 7
	} {
		step(w)
	}
	w.p.Locks = slices.Sorted(maps.Keys(w.locks))
	w.p.Tables = b.tables()
	return w.p
}

// planWriter collects a plan's steps and the tables they lock.
type planWriter struct {
	p     *Plan
	locks map[string]bool
}

// add appends the statement sql, which does what, and locks lock ("" for
// nothing that Apply must lock first).
func (w *planWriter) add(sql, what, lock string) {
	w.p.Steps = append(w.p.Steps, Step{SQL: sql, Locks: what})
	if lock != "" {
		w.locks[lock] = true
	}
}

// dropObjects drops what PostgreSQL will not carry across the change of
// type, those that need others last.
func (b *planner) dropObjects(w *planWriter) {
	for i := len(b.objects) - 1; i >= 0; i-- {
		o := b.objects[i]
		for _, stmt := range o.drop {
			w.add(stmt, o.name+": dropped, and created again below as it was"+o.because()+"; catalog only", o.lock)
		}
	}
}

// dropIdentities copies each identity's sequence, drops the identities,
// and gives each copy its sequence's name.
func (b *planner) dropIdentities(w *planWriter) {
	for _, k := range b.seqs {
		for _, stmt := range k.create {
			w.add(stmt, "sequence "+k.name+": copied to "+k.temp+" with its current value, before DROP IDENTITY drops it; catalog only", "")
		}
	}
	for _, t := range b.targets {
		if t.identity {
			w.add(fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s DROP IDENTITY", t.name, t.key.name),
				t.name+": drops the key's identity and its sequence; catalog only, instant", t.name)
		}
	}
	for _, k := range b.seqs {
		for _, stmt := range k.after {
			w.add(stmt, "sequence "+k.name+": kept, unused, with its owner, comment and privileges (drop it once nothing calls nextval on it); catalog only", "")
		}
	}
}

// makeTwins makes the twins of domains over integer that do not exist
// yet.
func (b *planner) makeTwins(w *planWriter) {
	for _, tw := range b.twins {
		if tw.exists {
			continue
		}
		for _, stmt := range tw.create {
			w.add(stmt, "domain "+tw.name+", a twin of "+tw.of.name+
				" over bigint with its default, constraints, owner and privileges, for the columns of that domain below; catalog only", "")
		}
	}
}

// widenColumns widens the columns, one ALTER TABLE a table, so that each
// is rewritten once, on the topmost parent.
func (b *planner) widenColumns(w *planWriter) {
	var tables []string
	cols := map[string][]*column{}
	for _, c := range b.widen {
		if cols[c.table] == nil {
			tables = append(tables, c.table)
		}
		cols[c.table] = append(cols[c.table], c)
	}
	for _, table := range tables {
		var parts, names []string
		reach := map[string]bool{}
		for _, c := range cols[table] {
			to := "bigint"
			if c.domain != nil && b.twinOf[c.domain.oid] != nil {
				to = b.twinOf[c.domain.oid].name
			}
			parts = append(parts, fmt.Sprintf("ALTER COLUMN %s TYPE %s", c.name, to))
			names = append(names, fmt.Sprintf("%s %s to %s", c.name, c.typ, to))
			for _, m := range c.family {
				if m.rel != c.rel {
					reach[m.table] = true
				}
			}
		}
		what := fmt.Sprintf("%s: %s; rewrites the table and rebuilds its indexes, and checks again "+
			"the foreign keys on these columns (reading the tables they join): time grows with the table's size",
			table, strings.Join(names, ", "))
		if len(reach) > 0 {
			what += "; reaches its partitions and children " + strings.Join(slices.Sorted(maps.Keys(reach)), ", ")
		}
		w.add(fmt.Sprintf("ALTER TABLE %s %s", table, strings.Join(parts, ", ")), what, table)
	}
}

// setDefaults sets the keys' defaults and detaches serial sequences.
func (b *planner) setDefaults(w *planWriter) {
	for _, t := range b.targets {
		switch {
		case t.def == "" && !t.identity:
			// Keys without a default come from the app, or from another
			// table's key (a one-to-one key that is a foreign key): adopt
			// replaces a default, it does not add one.
		case !b.o.AppKeys && snowflakeDefault.MatchString(t.def):
		case !b.o.AppKeys:
			what := t.name + ": new rows get snowflake_id() keys; catalog only, instant"
			if t.partitioned {
				what = t.name + ": new rows get snowflake_id() keys, in every partition too; catalog only, instant"
			}
			w.add(fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s()", t.name, t.key.name, b.fn), what, t.name)
		case t.def != "":
			w.add(fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT", t.name, t.key.name),
				t.name+": new rows must bring their keys (gormplugin fills them); catalog only, instant", t.name)
		}
		if t.seq != "" && !t.identity {
			w.add(fmt.Sprintf("ALTER SEQUENCE %s OWNED BY NONE", t.seq),
				"sequence "+t.seq+": detached from the key and kept, unused (drop it once nothing calls nextval on it); catalog only", "")
		}
	}
}

// createObjects creates again what was dropped, and replaces the
// functions whose variables alone change, those needed by others first.
func (b *planner) createObjects(w *planWriter) {
	for _, o := range b.objects {
		w.p.functions = w.p.functions || o.kind == objFunction
		for _, stmt := range o.create {
			w.add(stmt, o.name+o.because()+": catalog only", o.lock)
		}
	}
}

// refreshViews refreshes the materialized views that were populated.
func (b *planner) refreshViews(w *planWriter) {
	for _, o := range b.objects {
		if o.refresh != "" {
			w.add(o.refresh, o.name+": filled again by its query, as its owner; reads the tables it is made of", o.lock)
		}
	}
}

// tables describes each table of the plan, as found.
func (b *planner) tables() []Table {
	var out []Table
	for _, t := range b.targets {
		at := Table{Name: t.name, Key: t.key.name, Type: t.key.typ, Default: t.def, MaxKey: t.maxKey}
		if t.identity {
			at.Default = "identity"
		}
		for _, r := range t.refs {
			at.Referrers = append(at.Referrers, r.String())
		}
		out = append(out, at)
	}
	return out
}

// because says, after an object's name, what changes in it, if anything.
func (o *object) because() string {
	if o.why == "" {
		return ""
	}
	return " (" + o.why + ")"
}
