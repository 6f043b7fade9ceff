package gormplugin_test

import (
	"errors"
	"testing"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
)

// TestFieldRules checks, without a database (GORM's dry run), which
// fields of each kind of model the plugin fills.
func TestFieldRules(t *testing.T) {
	type (
		uintKey struct {
			ID   uint64
			Name string
		}
		int64Untagged struct {
			ID   int64
			Name string
		}
		generated struct {
			ID idtype.ID `gorm:"primaryKey;generated:identity"`
		}
		autoInc struct {
			ID idtype.ID `gorm:"primaryKey;autoIncrement"`
		}
		readOnly struct {
			ID  idtype.ID `gorm:"primaryKey"`
			Ext int64     `gorm:"snowflake;<-:false"`
		}
		customInt struct {
			ID  idtype.ID `gorm:"primaryKey"`
			Seq Seq       `gorm:"snowflake"`
		}
		ptrTagged struct {
			ID  idtype.ID `gorm:"primaryKey"`
			Ref *int64    `gorm:"snowflake"`
		}
	)
	db := dryRun()
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		t.Fatal(err)
	}
	c := &Company{}
	u := &uintKey{}
	i := &int64Untagged{}
	g := &generated{}
	a := &autoInc{}
	r := &readOnly{}
	ci := &customInt{}
	pt := &ptrTagged{}
	m := &Membership{}
	l := &Line{}
	o := &OptedOut{}
	au := &Audit{}
	for _, v := range []any{c, u, i, g, a, r, ci, pt, m, l, o, au} {
		if err := db.Create(v).Error; err != nil {
			t.Fatalf("create %T: %v", v, err)
		}
	}
	cases := []struct {
		what string
		ok   bool
	}{
		{"idtype.ID key filled", c.ID != 0},
		{"uint key left to GORM", u.ID == 0},
		{"untagged int64 key left to GORM", i.ID == 0},
		{"generated identity left to the database", g.ID == 0},
		{"explicit autoIncrement left to the database", a.ID == 0},
		{"tagged but not creatable left alone", r.ID != 0 && r.Ext == 0},
		{"tagged custom int64 type filled", ci.ID != 0 && ci.Seq != 0 && idtype.ID(ci.Seq) > ci.ID},
		{"tagged nil pointer allocated and filled", pt.Ref != nil && *pt.Ref != 0},
		{"composite key left alone", m.GroupID == 0 && m.UserID == 0},
		{"tagged half of a composite key filled", l.ID != 0 && l.Pos == 0},
		{"snowflake:false left alone", o.ID == 0},
		{"database default left to the database", au.ID == 0},
	}
	for _, tc := range cases {
		if !tc.ok {
			t.Errorf("%s: no", tc.what)
		}
	}
	if w := idtype.DefaultLayout.Decode(c.ID).Worker; w != 5 {
		t.Errorf("key from worker %d, want the generator's 5", w)
	}

	// A preset pointer key and a preset tagged field stay.
	preset := int64(12345)
	keep := &ptrTagged{ID: 99, Ref: &preset}
	if err := db.Create(keep).Error; err != nil || keep.ID != 99 || *keep.Ref != 12345 || keep.Ref != &preset {
		t.Errorf("preset keys changed: %v, %+v", err, keep)
	}
}

// Seq is an app's own 64-bit integer type.
type Seq int64

func TestNoDatabaseErrors(t *testing.T) {
	db := dryRun()
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 5, NotBefore: nowPlus(60), MaxWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		t.Fatal(err)
	}
	c := Company{}
	err = db.Create(&c).Error
	if !errors.Is(err, gormplugin.ErrGenerate) || !errors.Is(err, idtype.ErrClockBehind) || c.ID != 0 {
		t.Errorf("failing source: %v, key %d", err, c.ID)
	}
	if !containsAll(err.Error(), "companies", "id") {
		t.Errorf("error %q does not name the table and column", err)
	}
	// Registering twice on one *gorm.DB is refused by GORM.
	if err := db.Use(gormplugin.New(gen, gormplugin.Options{})); err == nil {
		t.Errorf("a second plugin of the same name was accepted")
	}
}

// TestFieldTypes checks which types a field tagged snowflake may have:
// the int64 kind, behind a pointer or not; anything else fails every
// create of the model with ErrFieldType, naming the field, its type and
// the types that work.
func TestFieldTypes(t *testing.T) {
	db := dryRun()
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		t.Fatal(err)
	}
	type (
		tagInt64 struct {
			ID  idtype.ID `gorm:"primaryKey"`
			Ref int64     `gorm:"snowflake"`
		}
		tagSeqPtr struct {
			ID  idtype.ID `gorm:"primaryKey"`
			Ref *Seq      `gorm:"snowflake"`
		}
		tagUint64 struct {
			ID  idtype.ID `gorm:"primaryKey"`
			Ref uint64    `gorm:"snowflake"`
		}
		tagInt struct {
			ID  idtype.ID `gorm:"primaryKey"`
			Ref int       `gorm:"snowflake"`
		}
		tagUint64Key struct {
			ID uint64 `gorm:"primaryKey;snowflake"`
		}
	)
	a, b := &tagInt64{}, &tagSeqPtr{}
	if err := db.Create(a).Error; err != nil || a.Ref == 0 {
		t.Errorf("int64 tagged snowflake: %v, %+v", err, a)
	}
	if err := db.Create(b).Error; err != nil || b.Ref == nil || *b.Ref == 0 {
		t.Errorf("*Seq tagged snowflake: %v, %+v", err, b)
	}
	for _, tc := range []struct {
		v          any
		field, typ string
	}{
		{&tagUint64{}, "tagUint64.Ref", "uint64"},
		{&tagInt{}, "tagInt.Ref", "int"},
		{&tagUint64Key{}, "tagUint64Key.ID", "uint64"},
	} {
		err := db.Create(tc.v).Error
		if !errors.Is(err, gormplugin.ErrFieldType) ||
			!containsAll(err.Error(), tc.field+" is "+tc.typ+";", "int64, idtype.ID, another type defined as int64, or a pointer to one") {
			t.Errorf("%T: %v; want ErrFieldType naming %s, %s and the types that work", tc.v, err, tc.field, tc.typ)
		}
	}
}

// TestNewArguments: a nil Source makes db.Use fail with idtype.ErrInvalidOptions, and then nothing is registered.
func TestNewArguments(t *testing.T) {
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    *gormplugin.Plugin
		says string
	}{
		{"nil Source", gormplugin.New(nil, gormplugin.Options{}), "Source is nil"},
	} {
		db := dryRun()
		err := db.Use(tc.p)
		if !errors.Is(err, idtype.ErrInvalidOptions) || !containsAll(err.Error(), tc.says) {
			t.Errorf("%s: db.Use = %v; want idtype.ErrInvalidOptions saying %q", tc.name, err, tc.says)
		}
		c := Company{}
		if err := db.Create(&c).Error; err != nil || c.ID != 0 {
			t.Errorf("%s: a plugin that failed to initialize filled a key: %v, %d", tc.name, err, c.ID)
		}
		if db.Callback().Create().Get(gormplugin.CallbackName) != nil {
			t.Errorf("%s: the create callback is registered", tc.name)
		}
	}

	// Any Options is fine; the zero one is the default.
	for _, opts := range []gormplugin.Options{{}, {OnlyTagged: true}} {
		db := dryRun()
		if err := db.Use(gormplugin.New(gen, opts)); err != nil {
			t.Fatalf("New(gen, %+v): %v", opts, err)
		}
		c := Company{}
		if err := db.Create(&c).Error; err != nil {
			t.Fatal(err)
		}
		if filled := c.ID != 0; filled == opts.OnlyTagged {
			t.Errorf("New(gen, %+v): untagged idtype.ID key filled = %v", opts, filled)
		}
	}
}
