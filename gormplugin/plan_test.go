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
	if err := db.Use(gormplugin.New(gen)); err != nil {
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
	if err := db.Use(gormplugin.New(gen)); err != nil {
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
	if err := db.Use(gormplugin.New(gen)); err == nil {
		t.Errorf("a second plugin of the same name was accepted")
	}
}
