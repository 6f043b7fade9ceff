package gormplugin_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestCreatePaths creates rows in every way GORM can, and checks each in
// the database: the row's key equals the struct's, non-zero and unique.
func TestCreatePaths(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	db := e.db
	var want []idtype.ID
	collect := func(ids ...idtype.ID) { want = append(want, ids...) }

	t.Run("pointer", func(t *testing.T) {
		c := Company{Name: "a"}
		if err := db.Create(&c).Error; err != nil {
			t.Fatal(err)
		}
		collect(c.ID)
	})
	t.Run("slice pointer", func(t *testing.T) {
		cs := []Company{{Name: "b"}, {Name: "c"}, {Name: "d"}}
		if err := db.Create(&cs).Error; err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(cs); i++ {
			if cs[i].ID <= cs[i-1].ID {
				t.Errorf("keys of a batch not increasing in slice order: %d after %d", cs[i].ID, cs[i-1].ID)
			}
		}
		collect(cs[0].ID, cs[1].ID, cs[2].ID)
	})
	t.Run("slice value", func(t *testing.T) {
		cs := []Company{{Name: "e"}, {Name: "f"}}
		if err := db.Create(cs).Error; err != nil { // elements of a slice are addressable
			t.Fatal(err)
		}
		collect(cs[0].ID, cs[1].ID)
	})
	t.Run("slice of pointers", func(t *testing.T) {
		cs := []*Company{{Name: "g"}, {Name: "h"}}
		if err := db.Create(&cs).Error; err != nil {
			t.Fatal(err)
		}
		collect(cs[0].ID, cs[1].ID)
	})
	t.Run("array", func(t *testing.T) {
		var cs [3]Company
		for i := range cs {
			cs[i].Name = fmt.Sprint("arr", i)
		}
		if err := db.Create(&cs).Error; err != nil {
			t.Fatal(err)
		}
		collect(cs[0].ID, cs[1].ID, cs[2].ID)
	})
	t.Run("CreateInBatches", func(t *testing.T) {
		cs := make([]Company, 2500)
		before := e.src.calls.Load()
		if err := db.CreateInBatches(&cs, 1000).Error; err != nil {
			t.Fatal(err)
		}
		if calls := e.src.calls.Load() - before; calls != 3 {
			t.Errorf("2,500 rows in batches of 1,000 took %d NextN calls, want 3 (one per batch)", calls)
		}
		for _, c := range cs {
			collect(c.ID)
		}
	})
	t.Run("Save with a zero key", func(t *testing.T) {
		c := Company{Name: "saved"}
		if err := db.Save(&c).Error; err != nil {
			t.Fatal(err)
		}
		collect(c.ID)
		// Saving it again updates the same row.
		id := c.ID
		c.Name = "saved again"
		if err := db.Save(&c).Error; err != nil || c.ID != id {
			t.Fatalf("second Save: key %d -> %d, %v", id, c.ID, err)
		}
	})
	t.Run("Save of a slice", func(t *testing.T) {
		cs := []Company{{Name: "s1"}, {Name: "s2"}}
		if err := db.Save(&cs).Error; err != nil {
			t.Fatal(err)
		}
		collect(cs[0].ID, cs[1].ID)
	})
	t.Run("FirstOrCreate", func(t *testing.T) {
		var c Company
		if err := db.Where(Company{Name: "foc"}).FirstOrCreate(&c).Error; err != nil {
			t.Fatal(err)
		}
		collect(c.ID)
		var again Company
		if err := db.Where(Company{Name: "foc"}).FirstOrCreate(&again).Error; err != nil || again.ID != c.ID {
			t.Errorf("FirstOrCreate of an existing row: %d, %v; want %d", again.ID, err, c.ID)
		}
	})
	t.Run("SkipHooks", func(t *testing.T) {
		c := Company{Name: "nohooks"}
		if err := db.Session(&gorm.Session{SkipHooks: true}).Create(&c).Error; err != nil {
			t.Fatal(err)
		}
		collect(c.ID)
	})
	t.Run("transaction", func(t *testing.T) {
		c := Company{Name: "tx"}
		err := db.Transaction(func(tx *gorm.DB) error { return tx.Create(&c).Error })
		if err != nil {
			t.Fatal(err)
		}
		collect(c.ID)
	})
	e.checkKeys(t, "companies", want...)
}

func TestCreateMaps(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	db := e.db
	preset := idtype.ID(777)
	m1 := map[string]any{"Name": "by field name"}
	m2 := map[string]any{"name": "zero by column", "id": idtype.ID(0)}
	m3 := map[string]any{"Name": "zero by field", "ID": nil}
	m4 := map[string]any{"name": "preset", "id": preset}
	for _, m := range []map[string]any{m1, m2, m3, m4} {
		if err := db.Model(&Company{}).Create(m).Error; err != nil {
			t.Fatal(err)
		}
	}
	ms := []map[string]any{{"Name": "s1"}, {"Name": "s2", "ID": idtype.ID(0)}, {"name": "s3"}}
	before := e.src.calls.Load()
	if err := db.Model(&Company{}).Create(&ms).Error; err != nil {
		t.Fatal(err)
	}
	if calls := e.src.calls.Load() - before; calls != 1 {
		t.Errorf("a slice of 3 maps took %d NextN calls, want 1", calls)
	}

	key := func(m map[string]any, k string) idtype.ID {
		t.Helper()
		id, ok := m[k].(idtype.ID)
		if !ok {
			t.Fatalf("map %v has %q = %#v, want an idtype.ID", m, k, m[k])
		}
		return id
	}
	got := []idtype.ID{key(m1, "id"), key(m2, "id"), key(m3, "ID"), key(ms[0], "id"), key(ms[1], "ID"), key(ms[2], "id")}
	if _, added := m3["id"]; added {
		t.Errorf("a key given by field name was added again by column name: %v", m3)
	}
	if m4["id"] != preset {
		t.Errorf("a preset key in a map was changed to %v", m4["id"])
	}
	if res, err := e.sql.Exec("DELETE FROM companies WHERE id = $1", preset); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("preset key %d from a map: %d rows", preset, n)
	}
	e.checkKeys(t, "companies", got...)

	// A map with a tagged int64 field gets an int64.
	om := map[string]any{"Note": "map order"}
	if err := db.Model(&Order{}).Create(om).Error; err != nil {
		t.Fatal(err)
	}
	if n, ok := om["number"].(int64); !ok || n == 0 {
		t.Errorf("tagged int64 in a map: %#v", om["number"])
	}
}

func TestAssociations(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	db := e.db
	en := Language{Code: "en"}
	if err := db.Create(&en).Error; err != nil { // an existing row, linked again below
		t.Fatal(err)
	}
	u := User{
		Name:      "ada",
		Company:   &Company{Name: "acme"},                     // belongs-to
		Profile:   &Profile{Bio: "hi"},                        // has-one
		Posts:     []Post{{Title: "one"}, {Title: "two"}},     // has-many
		Languages: []Language{en, {Code: "fr"}, {Code: "de"}}, // many2many
	}
	users := []User{u, {Name: "bob", Posts: []Post{{Title: "three"}}, Languages: []Language{{Code: "it"}}}}
	if err := db.Create(&users).Error; err != nil {
		t.Fatal(err)
	}
	a, b := users[0], users[1]
	e.checkKeys(t, "users", a.ID, b.ID)
	e.checkKeys(t, "companies", a.Company.ID)
	e.checkKeys(t, "profiles", a.Profile.ID)
	e.checkKeys(t, "posts", a.Posts[0].ID, a.Posts[1].ID, b.Posts[0].ID)
	e.checkKeys(t, "languages", en.ID, a.Languages[1].ID, a.Languages[2].ID, b.Languages[0].ID)
	if a.Languages[0].ID != en.ID {
		t.Errorf("an existing language was given a new key: %d, was %d", a.Languages[0].ID, en.ID)
	}

	// The foreign keys, in the structs and in the rows.
	if a.CompanyID == nil || *a.CompanyID != a.Company.ID {
		t.Errorf("user.CompanyID = %v, company key %d", a.CompanyID, a.Company.ID)
	}
	if a.Profile.UserID != a.ID || a.Posts[1].UserID != a.ID || b.Posts[0].UserID != b.ID {
		t.Errorf("has-one/has-many foreign keys in the structs do not match their owners")
	}
	var loaded []User
	if err := db.Preload("Company").Preload("Profile").Preload("Posts").Preload("Languages").
		Order("id").Find(&loaded).Error; err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 2 || loaded[0].ID != a.ID || loaded[0].Company == nil || loaded[0].Company.ID != a.Company.ID ||
		loaded[0].Profile == nil || loaded[0].Profile.ID != a.Profile.ID || len(loaded[0].Posts) != 2 ||
		len(loaded[0].Languages) != 3 || len(loaded[1].Posts) != 1 || loaded[1].Posts[0].ID != b.Posts[0].ID {
		t.Fatalf("associations read back wrong: %+v", loaded)
	}
	// The join table's composite key holds the two sides' keys and nothing
	// the plugin made up.
	rows, err := e.sql.Query("SELECT user_id, language_id FROM user_languages")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	langs := map[idtype.ID]bool{en.ID: true, a.Languages[1].ID: true, a.Languages[2].ID: true, b.Languages[0].ID: true}
	n := 0
	for rows.Next() {
		var uid, lid idtype.ID
		if err := rows.Scan(&uid, &lid); err != nil {
			t.Fatal(err)
		}
		if (uid != a.ID && uid != b.ID) || !langs[lid] {
			t.Errorf("join row (%d, %d) does not link a user to a language", uid, lid)
		}
		n++
	}
	if n != 4 {
		t.Errorf("%d join rows, want 4", n)
	}
}

func TestRules(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	db := e.db

	t.Run("preset key kept", func(t *testing.T) {
		gen, _ := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 9})
		preset, _ := gen.Next()
		cs := []Company{{ID: preset, Name: "preset"}, {Name: "zero"}}
		if err := db.Create(&cs).Error; err != nil {
			t.Fatal(err)
		}
		if cs[0].ID != preset || cs[1].ID == 0 {
			t.Errorf("keys %d, %d; want %d kept and the other filled", cs[0].ID, cs[1].ID, preset)
		}
		if !e.keys(t, "companies", "id")[preset] {
			t.Errorf("preset key %d not in the table", preset)
		}
	})
	t.Run("BeforeCreate sees the key", func(t *testing.T) {
		h := Hooked{}
		if err := db.Create(&h).Error; err != nil {
			t.Fatal(err)
		}
		if h.SeenID == 0 || h.SeenID != h.ID {
			t.Errorf("BeforeCreate saw %d, the row has %d", h.SeenID, h.ID)
		}
	})
	t.Run("tagged int64 field", func(t *testing.T) {
		os := []Order{{Note: "a"}, {Note: "b", Number: 42}}
		before := e.src.calls.Load()
		if err := db.Create(&os).Error; err != nil {
			t.Fatal(err)
		}
		if calls := e.src.calls.Load() - before; calls != 1 {
			t.Errorf("%d NextN calls for one batch with keys and tagged fields, want 1", calls)
		}
		if os[0].ID == 0 || os[0].Number == 0 || os[1].Number != 42 {
			t.Errorf("orders %+v", os)
		}
		var n int64
		if err := e.sql.QueryRow("SELECT number FROM orders WHERE id = $1", os[0].ID).Scan(&n); err != nil || n != os[0].Number {
			t.Errorf("row number %d, %v; struct %d", n, err, os[0].Number)
		}
	})
	t.Run("tagged int64 primary key", func(t *testing.T) {
		l := Legacy{Name: "legacy"}
		if err := db.Create(&l).Error; err != nil {
			t.Fatal(err)
		}
		e.checkKeys(t, "legacies", idtype.ID(l.ID))
	})
	t.Run("database default left to the database", func(t *testing.T) {
		before := e.src.ids.Load()
		as := []Audit{{What: "x"}, {What: "y"}}
		if err := db.Create(&as).Error; err != nil {
			t.Fatal(err)
		}
		if n := e.src.ids.Load() - before; n != 0 {
			t.Errorf("the plugin issued %d IDs for a key with a database default", n)
		}
		for _, a := range as {
			if a.ID == 0 || idtype.DefaultLayout.Decode(a.ID).Worker != 1023 {
				t.Errorf("audit key %d: want one from snowflake_id() (worker 1023), read back by GORM", a.ID)
			}
		}
		got := e.keys(t, "audits", "id")
		if !got[as[0].ID] || !got[as[1].ID] {
			t.Errorf("audit keys %d, %d not in the table %v", as[0].ID, as[1].ID, got)
		}
	})
	t.Run("composite key left alone", func(t *testing.T) {
		before := e.src.ids.Load()
		m := Membership{GroupID: 1, UserID: 2}
		if err := db.Create(&m).Error; err != nil {
			t.Fatal(err)
		}
		if n := e.src.ids.Load() - before; n != 0 || m.GroupID != 1 || m.UserID != 2 {
			t.Errorf("composite key: %d IDs issued, key now (%d, %d)", n, m.GroupID, m.UserID)
		}
		zero := Membership{} // its zero key is the app's business
		if err := db.Create(&zero).Error; err != nil || zero.GroupID != 0 {
			t.Errorf("composite zero key: %v, %+v", err, zero)
		}
	})
	t.Run("composite key with a tagged half", func(t *testing.T) {
		ls := []Line{{Pos: 1}, {Pos: 2}}
		if err := db.Create(&ls).Error; err != nil {
			t.Fatal(err)
		}
		e.checkKeys(t, "lines", ls[0].ID, ls[1].ID)
	})
	t.Run("pointer key", func(t *testing.T) {
		p := PtrKey{Name: "ptr"}
		if err := db.Create(&p).Error; err != nil {
			t.Fatal(err)
		}
		if p.ID == nil || *p.ID == 0 {
			t.Fatalf("pointer key not filled: %v", p.ID)
		}
		e.checkKeys(t, "ptr_keys", *p.ID)
	})
	t.Run("embedded key", func(t *testing.T) {
		em := []*Embedded{{Name: "a"}, {Name: "b"}}
		if err := db.Create(&em).Error; err != nil {
			t.Fatal(err)
		}
		e.checkKeys(t, "embeddeds", em[0].ID, em[1].ID)
	})
	t.Run("snowflake:false", func(t *testing.T) {
		o := OptedOut{ID: 5, Name: "mine"}
		before := e.src.ids.Load()
		if err := db.Create(&o).Error; err != nil || o.ID != 5 || e.src.ids.Load() != before {
			t.Errorf("opted-out key: %v, %+v", err, o)
		}
	})
	t.Run("Omit", func(t *testing.T) {
		o := Order{Note: "omitted number"}
		if err := db.Omit("Number").Create(&o).Error; err != nil {
			t.Fatal(err)
		}
		if o.ID == 0 || o.Number != 0 {
			t.Errorf("Omit(Number): %+v; want the key filled and Number left zero", o)
		}
		var isNull bool
		if err := e.sql.QueryRow("SELECT number IS NULL FROM orders WHERE id = $1", o.ID).Scan(&isNull); err != nil || !isNull {
			t.Errorf("omitted column in the row: null=%v, %v", isNull, err)
		}
		c := Company{Name: "omit key"}
		err := db.Omit("ID").Create(&c).Error // no key and no default: the database refuses
		if err == nil || c.ID != 0 {
			t.Errorf("Omit(ID): %v, key %d; want the key left zero and the insert refused", err, c.ID)
		}
	})
	t.Run("Select", func(t *testing.T) {
		o := Order{Note: "selected"}
		if err := db.Select("ID", "Note").Create(&o).Error; err != nil {
			t.Fatal(err)
		}
		if o.ID == 0 || o.Number != 0 {
			t.Errorf("Select(ID, Note): %+v; want only the key filled", o)
		}
	})
}

func TestRulesOnlyTagged(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{OnlyTagged: true})
	c := Company{ID: 3, Name: "untagged key: mine"}
	o := Order{ID: 4}
	if err := e.db.Create(&c).Error; err != nil || c.ID != 3 {
		t.Fatalf("untagged key with OnlyTagged: %v, %+v", err, c)
	}
	if err := e.db.Create(&o).Error; err != nil || o.ID != 4 || o.Number == 0 {
		t.Fatalf("tagged field with OnlyTagged: %v, %+v", err, o)
	}
	zero := Company{Name: "left zero"}
	if err := e.db.Create(&zero).Error; err != nil || zero.ID != 0 || !e.keys(t, "companies", "id")[0] {
		t.Errorf("an untagged zero key with OnlyTagged: %v, key %d; want it inserted as 0, untouched", err, zero.ID)
	}
}

func TestErrors(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})

	t.Run("generator fails", func(t *testing.T) {
		// A generator whose floor is an hour ahead and that may not wait:
		// NextN fails with ErrClockBehind.
		gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 2, NotBefore: nowPlus(3600), MaxWait: -1})
		if err != nil {
			t.Fatal(err)
		}
		db, err := gorm.Open(e.db.Dialector, &gorm.Config{Logger: e.db.Logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
			t.Fatal(err)
		}
		u := User{Name: "nope", Company: &Company{Name: "nope"}, Posts: []Post{{Title: "nope"}}}
		err = db.Create(&u).Error
		if !errors.Is(err, gormplugin.ErrGenerate) || !errors.Is(err, idtype.ErrClockBehind) {
			t.Fatalf("create with a failing generator: %v; want ErrGenerate wrapping ErrClockBehind", err)
		}
		t.Log(err)
		if u.ID != 0 || u.Company.ID != 0 {
			t.Errorf("a failed create left keys in the structs: %d, %d", u.ID, u.Company.ID)
		}
		for _, table := range []string{"users", "companies", "posts"} {
			if n := len(e.keys(t, table, "id")); n != 0 {
				t.Errorf("%s has %d rows after a failed create", table, n)
			}
		}
		if err := db.Create(&[]Company{{}, {}}).Error; !errors.Is(err, gormplugin.ErrGenerate) {
			t.Errorf("batch with a failing generator: %v", err)
		}
		if err := db.Model(&Company{}).Create(map[string]any{"name": "m"}).Error; !errors.Is(err, gormplugin.ErrGenerate) {
			t.Errorf("map with a failing generator: %v", err)
		}
	})

	t.Run("tagged field of the wrong type", func(t *testing.T) {
		type BadTag struct {
			ID   idtype.ID `gorm:"primaryKey"`
			Code string    `gorm:"snowflake"`
		}
		err := e.db.Create(&BadTag{}).Error
		if !errors.Is(err, gormplugin.ErrFieldType) || !containsAll(err.Error(), "BadTag.Code", "string") {
			t.Errorf("create of a string tagged snowflake: %v; want ErrFieldType naming BadTag.Code", err)
		}
	})

	t.Run("by value", func(t *testing.T) {
		err := e.db.Create(Company{Name: "by value"}).Error
		if !errors.Is(err, gormplugin.ErrNotAddressable) || !containsAll(err.Error(), "Company.ID", "pointer") {
			t.Errorf("create by value with a zero key: %v; want ErrNotAddressable", err)
		}
		if err := e.db.Create([2]Company{}).Error; !errors.Is(err, gormplugin.ErrNotAddressable) {
			t.Errorf("create of an array by value: %v; want ErrNotAddressable", err)
		}
		// With the key set there is nothing to write back: it works.
		if err := e.db.Create(Company{ID: 99, Name: "by value, keyed"}).Error; err != nil {
			t.Errorf("create by value with a key: %v", err)
		}
	})

	t.Run("nil element", func(t *testing.T) {
		cs := []*Company{{Name: "ok"}, nil}
		err := e.db.Create(&cs).Error
		if !errors.Is(err, gorm.ErrInvalidData) {
			t.Errorf("slice with a nil element: %v; want GORM's ErrInvalidData", err)
		}
	})
}

// TestConcurrentCreates: 8 goroutines x 500 single-row creates through one
// plugin; no key collides.
func TestConcurrentCreates(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	const workers, each = 8, 500
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  []idtype.ID
		errs = make(chan error, workers)
	)
	for w := range workers {
		wg.Go(func() {
			mine := make([]idtype.ID, 0, each)
			for i := range each {
				c := Company{Name: fmt.Sprintf("w%d-%d", w, i)}
				if err := e.db.Create(&c).Error; err != nil {
					errs <- err
					return
				}
				mine = append(mine, c.ID)
			}
			mu.Lock()
			ids = append(ids, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e.checkKeys(t, "companies", ids...)
}

// TestAutoMigrateTypes reads back from information_schema what AutoMigrate
// made of snowflake keys: plain bigint, no sequence behind them.
func TestAutoMigrateTypes(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	tests := []struct {
		table, column string
		typ           string
		dflt          string // "" for none; a prefix otherwise
	}{
		{"companies", "id", "bigint", ""},
		{"users", "id", "bigint", ""},
		{"users", "company_id", "bigint", ""},
		{"orders", "number", "bigint", ""},
		{"legacies", "id", "bigint", ""},
		{"ptr_keys", "id", "bigint", ""},
		{"embeddeds", "id", "bigint", ""},
		{"audits", "id", "bigint", "snowflake_id()"},
		{"user_languages", "user_id", "bigint", ""},
		{"serials", "id", "bigint", "nextval("}, // GORM's usual int64 key, for contrast: a bigserial
	}
	for _, tc := range tests {
		var typ string
		var dflt *string
		err := e.sql.QueryRow(`SELECT data_type, column_default FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`, tc.table, tc.column).Scan(&typ, &dflt)
		if err != nil {
			t.Fatalf("%s.%s: %v", tc.table, tc.column, err)
		}
		got := ""
		if dflt != nil {
			got = *dflt
		}
		if typ != tc.typ || (tc.dflt == "" && got != "") || (tc.dflt != "" && !hasPrefix(got, tc.dflt)) {
			t.Errorf("%s.%s is %s DEFAULT %q; want %s with default %q", tc.table, tc.column, typ, got, tc.typ, tc.dflt)
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !contains(s, sub) {
			return false
		}
	}
	return true
}
