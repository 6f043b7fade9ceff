package bulk

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/gormplugin"
)

// loadPlan is what a load writes for one input model, worked out once per
// call from GORM's schemas: one node per table the model and its
// associations reach, in the order the tables are loaded.
type loadPlan struct {
	root  *node
	nodes []*node // load order: every table after those it refers to
}

// node is one table of a load.
type node struct {
	table string
	ident pgx.Identifier
	s     *schema.Schema
	// keys are the fields the load fills (gormplugin's rules).
	keys []*schema.Field
	// cols are the columns every row sends: GORM's create columns, all
	// but those with a database default.
	cols []*schema.Field
	// dflt are the columns with a database default, which a row sends only
	// when its field is not zero, as db.Create does; rows that differ in them
	// are copied separately.
	dflt []*schema.Field
	// direct maps each column's field to its index in the struct when
	// reading it needs nothing of ValueOf but the field itself (a field of
	// the struct, without a serializer), and to -1 otherwise.
	direct map[*schema.Field]int
	// rels are the associations a row of this table saves, in the order
	// GORM saves them, with the nodes they lead to.
	rels []relation
	// after are the nodes whose rows this node's rows refer to.
	after []*node
	// idx is the node's place in loadPlan.nodes.
	idx int
	// writes are the fields a load may write into a row of this table
	// (keys, foreign keys, polymorphic types, GORM's values for zero
	// fields), the first 64 of them: a row notes those it wrote over a zero
	// value as bits of a mask, by their place here (bit). A field past the
	// 64th is noted as any field that was not zero is (see undo.go).
	writes []*schema.Field
	bit    map[*schema.Field]uint8

	// oids caches the column types of each column set copied (by
	// default-column mask), for naming a field pgx cannot encode; only the
	// copier uses it.
	oids map[uint64][]uint32
}

// newLoadPlan parses the model of the input rows, and of every
// association it reaches, and orders their tables.
func newLoadPlan(db *gorm.DB, model reflect.Type, o Options, d defences) (*loadPlan, error) {
	stmt := &gorm.Statement{DB: db, Table: db.Statement.Table}
	if err := stmt.Parse(reflect.New(model).Interface()); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrModel, model, err)
	}
	b := &planner{o: o, defences: d, byKey: map[nodeKey]*node{}}
	root, err := b.node(stmt.Schema, stmt.Table)
	if err != nil {
		return nil, err
	}
	if err := b.walk(root, map[*node]bool{}); err != nil {
		return nil, err
	}
	p := &loadPlan{root: root}
	state := map[*node]int{} // 1: being placed, 2: placed
	var place func(n *node)
	place = func(n *node) {
		if state[n] != 0 {
			// Placed, or on the path that leads here: a cycle of tables
			// that refer to each other is loaded in the order the models
			// declare it, which only DEFERRABLE foreign keys accept when
			// the rows need both directions.
			return
		}
		state[n] = 1
		for _, m := range n.after {
			place(m)
		}
		state[n] = 2
		n.idx = len(p.nodes)
		p.nodes = append(p.nodes, n)
	}
	for _, n := range b.order {
		place(n)
	}
	p.listWrites()
	return p, nil
}

// listWrites sets each node's writes: the fields a load may write into
// its rows.
func (p *loadPlan) listWrites() {
	add := func(n *node, f *schema.Field) {
		if _, ok := n.bit[f]; !ok && len(n.writes) < 64 {
			n.bit[f] = uint8(len(n.writes))
			n.writes = append(n.writes, f)
		}
	}
	// Keys first, in every node before any other field, so that a key's
	// bit is its place in n.keys (fill relies on it).
	for _, n := range p.nodes {
		n.bit = map[*schema.Field]uint8{}
		for _, f := range n.keys {
			add(n, f)
		}
	}
	for _, n := range p.nodes {
		for _, f := range n.cols {
			if f.DefaultValueInterface != nil || f.AutoCreateTime > 0 || f.AutoUpdateTime > 0 {
				add(n, f)
			}
		}
		for _, r := range n.rels {
			for _, ref := range r.rel.References {
				switch {
				case r.rel.Type == schema.BelongsTo && !ref.OwnPrimaryKey:
					add(n, ref.ForeignKey)
				case (r.rel.Type == schema.HasOne || r.rel.Type == schema.HasMany) && (ref.OwnPrimaryKey || ref.PrimaryValue != ""):
					add(r.to, ref.ForeignKey)
				}
			}
		}
	}
}

// relation is an association and the nodes its rows are written to.
type relation struct {
	rel  *schema.Relationship
	to   *node // the associated rows' table
	join *node // the join table of a many2many; nil otherwise
	// unique lists, for a many2many, each unique constraint of the join
	// table (its primary key, unique indexes and unique fields) whose
	// columns are all among the join's foreign keys, as indices into
	// rel.References: two join rows equal in one of them conflict, and
	// db.Create, which inserts join rows with ON CONFLICT DO NOTHING,
	// keeps the first.
	unique [][]int
}

type nodeKey struct {
	s     *schema.Schema
	table string
}

// planner builds the nodes of a plan.
type planner struct {
	o        Options
	defences defences // zero: every defence on; only export_test.go turns one off
	byKey    map[nodeKey]*node
	order    []*node // discovery order
}

// node returns the node of s written to table, made on first use.
func (b *planner) node(s *schema.Schema, table string) (*node, error) {
	k := nodeKey{s, table}
	if n, ok := b.byKey[k]; ok {
		return n, nil
	}
	if !b.o.SkipHooks && !b.defences.noHookCheck {
		if hooks := hooksOf(s); hooks != "" {
			return nil, fmt.Errorf("%w: %s has %s; set Options.SkipHooks to load it without them, "+
				"or call them on the rows yourself before the load", ErrHooks, s.Name, hooks)
		}
	}
	keys, err := gormplugin.KeyFields(s, b.o.OnlyTagged)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModel, err)
	}
	n := &node{table: table, ident: pgx.Identifier(strings.Split(table, ".")), s: s, keys: keys,
		oids: map[uint64][]uint32{}}
	for _, name := range s.DBNames {
		f := s.FieldsByDBName[name]
		if !f.Creatable {
			continue
		}
		if !f.HasDefaultValue || f.DefaultValueInterface != nil {
			n.cols = append(n.cols, f)
		}
	}
	for _, f := range s.FieldsWithDefaultDBValue {
		if f.Creatable && f.DBName != "" {
			n.dflt = append(n.dflt, f)
		}
	}
	n.direct = map[*schema.Field]int{}
	for _, f := range append(slices.Clip(n.cols), n.dflt...) {
		n.direct[f] = -1
		if len(f.StructField.Index) == 1 && f.Serializer == nil {
			n.direct[f] = f.StructField.Index[0]
		}
	}
	if len(n.dflt) > 64 {
		return nil, fmt.Errorf("%w: %s has %d columns with a database default; at most 64", ErrModel, s.Name, len(n.dflt))
	}
	b.byKey[k] = n
	b.order = append(b.order, n)
	return n, nil
}

// walk adds the nodes of every association of n's model, and the order
// between them.
func (b *planner) walk(n *node, seen map[*node]bool) error {
	if seen[n] {
		return nil
	}
	seen[n] = true
	for _, rel := range relations(n.s) {
		m, err := b.node(rel.FieldSchema, rel.FieldSchema.Table)
		if err != nil {
			return err
		}
		r := relation{rel: rel, to: m}
		switch rel.Type {
		case schema.BelongsTo:
			n.after = append(n.after, m)
		case schema.HasOne, schema.HasMany:
			m.after = append(m.after, n)
		case schema.Many2Many:
			if r.join, err = b.node(rel.JoinTable, rel.JoinTable.Table); err != nil {
				return err
			}
			r.join.after = append(r.join.after, n, m)
			r.unique = joinUniques(rel)
		default:
			continue
		}
		n.rels = append(n.rels, r)
		if err := b.walk(m, seen); err != nil {
			return err
		}
	}
	return nil
}

// relations lists the associations of s that a create saves, in the
// order GORM saves them: belongs-to first, then has-one, has-many and
// many2many. An association field GORM may not write (`<-:false`) is left
// out, as db.Create leaves it.
func relations(s *schema.Schema) []*schema.Relationship {
	var out []*schema.Relationship
	for _, list := range [][]*schema.Relationship{s.Relationships.BelongsTo, s.Relationships.HasOne,
		s.Relationships.HasMany, s.Relationships.Many2Many} {
		for _, rel := range list {
			if rel.Field.Creatable {
				out = append(out, rel)
			}
		}
	}
	return out
}

// hooksOf names the create hooks s has, or returns "".
func hooksOf(s *schema.Schema) string {
	var hooks []string
	for _, h := range []struct {
		has  bool
		name string
	}{{s.BeforeSave, "BeforeSave"}, {s.BeforeCreate, "BeforeCreate"}, {s.AfterCreate, "AfterCreate"}, {s.AfterSave, "AfterSave"}} {
		if h.has {
			hooks = append(hooks, h.name)
		}
	}
	return strings.Join(hooks, " and ")
}

// joinUniques lists the unique constraints of rel's join table whose
// columns are all foreign keys of the join (see relation.unique).
func joinUniques(rel *schema.Relationship) [][]int {
	js := rel.JoinTable
	refOf := func(f *schema.Field) int {
		for k, ref := range rel.References {
			if ref.ForeignKey.DBName == f.DBName {
				return k
			}
		}
		return -1
	}
	var out [][]int
	add := func(fields []*schema.Field) {
		if len(fields) == 0 {
			return
		}
		set := make([]int, 0, len(fields))
		for _, f := range fields {
			k := refOf(f)
			if k < 0 {
				return
			}
			set = append(set, k)
		}
		out = append(out, set)
	}
	add(js.PrimaryFields)
	for _, f := range js.Fields {
		if f.Unique {
			add([]*schema.Field{f})
		}
	}
	for _, idx := range js.ParseIndexes() {
		if !strings.EqualFold(idx.Class, "UNIQUE") || idx.Where != "" {
			continue
		}
		fields := make([]*schema.Field, 0, len(idx.Fields))
		for _, o := range idx.Fields {
			if o.Field == nil || o.Expression != "" {
				fields = nil
				break
			}
			fields = append(fields, o.Field)
		}
		add(fields)
	}
	return out
}
