package gormplugin

import (
	"fmt"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Plugin fills snowflake keys before GORM creates rows. Make one with New
// and register it with db.Use; it is safe for concurrent use by every
// session of that *gorm.DB.
type Plugin struct {
	src        idtype.Source
	onlyTagged bool
	// err, set by New, is what Initialize returns instead of registering
	// anything: New itself returns no error, to keep db.Use(New(gen))
	// one line.
	err   error
	plans sync.Map // *schema.Schema -> *plan
}

// Options configures a Plugin. Its zero value is the default: fill every
// zero idtype.ID primary key and every field tagged `gorm:"snowflake"`.
type Options struct {
	// OnlyTagged makes the plugin fill only fields tagged
	// `gorm:"snowflake"`, and leave untagged idtype.ID primary keys alone.
	// It suits a code base that adopts the plugin model by model. Zero
	// (false) means the plugin also fills a model's only primary key when
	// its type is idtype.ID.
	OnlyTagged bool
}

// New returns a plugin that takes its IDs from src, configured by opts;
// the zero Options is the default:
//
//	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
//	...
//	err = db.Use(gormplugin.New(gen, gormplugin.Options{}))
//	// or, to fill tagged fields only:
//	err = db.Use(gormplugin.New(gen, gormplugin.Options{OnlyTagged: true}))
//
// A nil src makes Initialize, and so db.Use, fail with an error wrapping
// idtype.ErrInvalidOptions, and the plugin registers nothing.
func New(src idtype.Source, opts Options) *Plugin {
	p := &Plugin{src: src, onlyTagged: opts.OnlyTagged}
	if src == nil {
		p.err = fmt.Errorf("%w: gormplugin.New: the Source is nil", idtype.ErrInvalidOptions)
	}
	return p
}

// CallbackName is the name of the plugin's create callback. It runs before
// GORM's "gorm:before_create", so that the model's own BeforeCreate and
// BeforeSave hooks already see their keys.
const CallbackName = "snowkey:assign_ids"

// Name returns the plugin's name for GORM, "snowkey:gormplugin". GORM
// refuses to register two plugins of one name on one *gorm.DB.
func (*Plugin) Name() string { return "snowkey:gormplugin" }

// Initialize registers on db the plugin's create callback, its update
// callback (UpdateCallbackName) and a builder of the ON CONFLICT clause
// that wraps any builder registered before it; the last two keep Save and
// UpdateAll upserts from changing an existing row's snowflake fields. db.Use
// calls it. It returns the error New recorded for bad arguments (wrapping
// idtype.ErrInvalidOptions), and then registers nothing.
func (p *Plugin) Initialize(db *gorm.DB) error {
	if p.err != nil {
		return p.err
	}
	if err := db.Callback().Create().Before("gorm:before_create").Register(CallbackName, p.assign); err != nil {
		return err
	}
	if err := db.Callback().Update().Before("gorm:update").Register(UpdateCallbackName, p.keepOnSave); err != nil {
		return err
	}
	if db.ClauseBuilders == nil {
		db.ClauseBuilders = map[string]clause.ClauseBuilder{}
	}
	db.ClauseBuilders[onConflict] = p.onConflictBuilder(db.ClauseBuilders[onConflict])
	return nil
}

// onConflict is the name of GORM's ON CONFLICT clause.
const onConflict = "ON CONFLICT"

// planOf returns which fields of s the plugin fills, worked out once per
// schema.
func (p *Plugin) planOf(s *schema.Schema) *plan {
	if v, ok := p.plans.Load(s); ok {
		return v.(*plan)
	}
	v, _ := p.plans.LoadOrStore(s, newPlan(s, p.onlyTagged))
	return v.(*plan)
}
