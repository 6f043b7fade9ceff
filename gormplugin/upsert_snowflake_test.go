package gormplugin_test

import (
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// Member has a snowflake that is not its key: a public ID, filled on
// create, that must never change once a row has it.
type Member struct {
	ID       idtype.ID `gorm:"primaryKey"`
	PublicID int64     `gorm:"snowflake;uniqueIndex"`
	Email    string    `gorm:"uniqueIndex"`
	Name     string
}

// Ticket's only column besides its key is a snowflake, so an UpdateAll
// upsert has nothing else to set.
type Ticket struct {
	ID     idtype.ID `gorm:"primaryKey"`
	Number int64     `gorm:"snowflake;uniqueIndex"`
}

// memberRow reads a member's row by email.
func memberRow(t *testing.T, e *env, email string) (id idtype.ID, public int64, name string) {
	t.Helper()
	if err := e.sql.QueryRow("SELECT id, public_id, name FROM members WHERE email = $1", email).Scan(&id, &public, &name); err != nil {
		t.Fatalf("row of %s: %v", email, err)
	}
	return id, public, name
}

// TestUpsertKeepsSnowflakeFields: an UpdateAll upsert updates an existing
// row's other columns but never its snowflake fields, on every create path,
// and the struct ends up holding the row's real values.
func TestUpsertKeepsSnowflakeFields(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	if err := e.db.AutoMigrate(&Member{}, &Ticket{}); err != nil {
		t.Fatal(err)
	}
	byEmail := clause.OnConflict{Columns: []clause.Column{{Name: "email"}}, UpdateAll: true}

	// seed creates members and returns them as the rows hold them.
	seed := func(t *testing.T, emails ...string) map[string]Member {
		t.Helper()
		ms := make([]Member, len(emails))
		for i, em := range emails {
			ms[i] = Member{Email: em, Name: "old"}
		}
		if err := e.db.Create(&ms).Error; err != nil {
			t.Fatal(err)
		}
		out := map[string]Member{}
		for _, m := range ms {
			if m.PublicID == 0 {
				t.Fatalf("seed %s got no public ID", m.Email)
			}
			out[m.Email] = m
		}
		return out
	}
	// check compares the structs with the rows and the seeded values.
	check := func(t *testing.T, got []Member, old map[string]Member) {
		t.Helper()
		for _, m := range got {
			id, public, name := memberRow(t, e, m.Email)
			if o, existed := old[m.Email]; existed && (public != o.PublicID || id != o.ID) {
				t.Errorf("%s: the upsert changed the row's (id, public_id) from (%d, %d) to (%d, %d)",
					m.Email, o.ID, o.PublicID, id, public)
			}
			if m.PublicID != public || m.ID != id {
				t.Errorf("%s: the struct holds (%d, %d), the row (%d, %d)", m.Email, m.ID, m.PublicID, id, public)
			}
			if name != "new" {
				t.Errorf("%s: name %q; the upsert should still update the other columns", m.Email, name)
			}
		}
	}

	t.Run("struct", func(t *testing.T) {
		old := seed(t, "s@x")
		m := Member{Email: "s@x", Name: "new"}
		if err := e.db.Clauses(byEmail).Create(&m).Error; err != nil {
			t.Fatal(err)
		}
		check(t, []Member{m}, old)
	})
	t.Run("slice", func(t *testing.T) {
		old := seed(t, "a@x", "b@x")
		ms := []Member{{Email: "a@x", Name: "new"}, {Email: "fresh@x", Name: "new"}, {Email: "b@x", Name: "new"}}
		if err := e.db.Clauses(byEmail).Create(&ms).Error; err != nil {
			t.Fatal(err)
		}
		check(t, ms, old)
	})
	t.Run("slice of pointers", func(t *testing.T) {
		old := seed(t, "p@x")
		ms := []*Member{{Email: "p@x", Name: "new"}}
		if err := e.db.Clauses(byEmail).Create(&ms).Error; err != nil {
			t.Fatal(err)
		}
		check(t, []Member{*ms[0]}, old)
	})
	t.Run("CreateInBatches", func(t *testing.T) {
		emails := make([]string, 5)
		for i := range emails {
			emails[i] = fmt.Sprintf("batch%d@x", i)
		}
		old := seed(t, emails...)
		ms := make([]Member, 7)
		for i := range ms {
			ms[i] = Member{Email: fmt.Sprintf("batch%d@x", i), Name: "new"} // 5 exist, 2 new
		}
		if err := e.db.Clauses(byEmail).CreateInBatches(&ms, 3).Error; err != nil {
			t.Fatal(err)
		}
		check(t, ms, old)
	})
	t.Run("Save of a slice", func(t *testing.T) {
		// Save of a slice is an upsert on the key with UpdateAll; the
		// structs know the keys but not the public IDs.
		old := seed(t, "save1@x", "save2@x")
		ms := []Member{{ID: old["save1@x"].ID, Email: "save1@x", Name: "new"}, {Email: "save3@x", Name: "new"},
			{ID: old["save2@x"].ID, Email: "save2@x", Name: "new"}}
		if err := e.db.Save(&ms).Error; err != nil {
			t.Fatal(err)
		}
		check(t, ms, old)
	})
	t.Run("Save of a struct", func(t *testing.T) {
		// Save of a struct with a key is an UPDATE of every column; a zero
		// snowflake field in it is "not known", as on create, and does not
		// zero the row's.
		old := seed(t, "one@x")
		m := Member{ID: old["one@x"].ID, Email: "one@x", Name: "new"}
		if err := e.db.Save(&m).Error; err != nil {
			t.Fatal(err)
		}
		check(t, []Member{m}, old)
		// A struct that holds a public ID updates the row's, as asked.
		m.PublicID, m.Name = 42, "new"
		if err := e.db.Save(&m).Error; err != nil {
			t.Fatal(err)
		}
		if _, public, _ := memberRow(t, e, "one@x"); public != 42 {
			t.Errorf("Save with PublicID 42: the row holds %d", public)
		}
	})
	t.Run("Save of a struct with no row yet", func(t *testing.T) {
		// The UPDATE finds no row, and Save creates it: the field is filled.
		gen, _ := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
		key, _ := gen.Next()
		m := Member{ID: key, Email: "norow@x", Name: "new"}
		if err := e.db.Save(&m).Error; err != nil {
			t.Fatal(err)
		}
		check(t, []Member{m}, nil)
		if m.PublicID == 0 {
			t.Error("Save of a new row left its public ID zero")
		}
	})
	t.Run("Save of a struct with nothing else to update", func(t *testing.T) {
		tk := Ticket{}
		if err := e.db.Create(&tk).Error; err != nil {
			t.Fatal(err)
		}
		again := Ticket{ID: tk.ID}
		if err := e.db.Save(&again).Error; err != nil {
			t.Fatal(err)
		}
		var number int64
		if err := e.sql.QueryRow("SELECT number FROM tickets WHERE id = $1", tk.ID).Scan(&number); err != nil {
			t.Fatal(err)
		}
		if number != tk.Number || again.Number != tk.Number {
			t.Errorf("ticket number after Save: row %d, struct %d; was %d", number, again.Number, tk.Number)
		}
	})
	t.Run("upsert on the key", func(t *testing.T) {
		old := seed(t, "key@x")
		m := Member{ID: old["key@x"].ID, Email: "key@x", Name: "new"}
		if err := e.db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&m).Error; err != nil {
			t.Fatal(err)
		}
		check(t, []Member{m}, old)
	})
	t.Run("nothing else to update", func(t *testing.T) {
		tk := Ticket{}
		if err := e.db.Create(&tk).Error; err != nil {
			t.Fatal(err)
		}
		again := Ticket{ID: tk.ID}
		if err := e.db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&again).Error; err != nil {
			t.Fatal(err)
		}
		var number int64
		if err := e.sql.QueryRow("SELECT number FROM tickets WHERE id = $1", tk.ID).Scan(&number); err != nil {
			t.Fatal(err)
		}
		if number != tk.Number || again.Number != tk.Number {
			t.Errorf("ticket number: row %d, struct %d; was %d", number, again.Number, tk.Number)
		}
	})
	t.Run("explicit DoUpdates of the column", func(t *testing.T) {
		// Naming the column is asking for it: it is updated.
		old := seed(t, "explicit@x")
		m := Member{Email: "explicit@x", Name: "new"}
		err := e.db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "email"}},
			DoUpdates: clause.AssignmentColumns([]string{"public_id", "name"})}).Create(&m).Error
		if err != nil {
			t.Fatal(err)
		}
		if _, public, _ := memberRow(t, e, "explicit@x"); public == old["explicit@x"].PublicID || public != m.PublicID {
			t.Errorf("explicit DoUpdates of public_id: row %d, struct %d, was %d", public, m.PublicID, old["explicit@x"].PublicID)
		}
	})
	t.Run("in a transaction", func(t *testing.T) {
		old := seed(t, "tx@x")
		m := Member{Email: "tx@x", Name: "new"}
		if err := e.db.Transaction(func(tx *gorm.DB) error { return tx.Clauses(byEmail).Create(&m).Error }); err != nil {
			t.Fatal(err)
		}
		check(t, []Member{m}, old)
	})
}
