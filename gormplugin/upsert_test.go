package gormplugin_test

import (
	"testing"
	"time"

	"gorm.io/gorm/clause"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// accountIDs reads email -> key from the table.
func accountIDs(t *testing.T, e *env) map[string]idtype.ID {
	t.Helper()
	rows, err := e.sql.Query("SELECT email, id FROM accounts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]idtype.ID{}
	for rows.Next() {
		var email string
		var id idtype.ID
		if err := rows.Scan(&email, &id); err != nil {
			t.Fatal(err)
		}
		out[email] = id
	}
	return out
}

func TestUpsert(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	e := newEnv(t, gormplugin.Options{})
	db := e.db
	first := Account{Email: "ada@example.com", Name: "Ada"}
	if err := db.Create(&first).Error; err != nil {
		t.Fatal(err)
	}
	if first.CreatedAt.IsZero() {
		t.Fatal("created_at (a database default) was not read back")
	}
	byEmail := clause.OnConflict{Columns: []clause.Column{{Name: "email"}}, DoUpdates: clause.AssignmentColumns([]string{"name"})}

	t.Run("struct, DO UPDATE on another column", func(t *testing.T) {
		again := Account{Email: "ada@example.com", Name: "Ada L."}
		if err := db.Clauses(byEmail).Create(&again).Error; err != nil {
			t.Fatal(err)
		}
		if again.ID != first.ID {
			t.Errorf("after the upsert the struct holds key %d; the row has %d", again.ID, first.ID)
		}
		if got := accountIDs(t, e)["ada@example.com"]; got != first.ID {
			t.Errorf("the row's key changed to %d", got)
		}
	})

	t.Run("batch, DO UPDATE", func(t *testing.T) {
		batch := []Account{{Email: "bob@example.com", Name: "Bob"}, {Email: "ada@example.com", Name: "Ada 3"},
			{Email: "cy@example.com", Name: "Cy"}}
		if err := db.Clauses(byEmail).Create(&batch).Error; err != nil {
			t.Fatal(err)
		}
		rows := accountIDs(t, e)
		for _, a := range batch {
			if a.ID == 0 || rows[a.Email] != a.ID {
				t.Errorf("%s: struct key %d, row key %d", a.Email, a.ID, rows[a.Email])
			}
			if a.CreatedAt.IsZero() {
				t.Errorf("%s: created_at not read back", a.Email)
			}
		}
		if batch[1].ID != first.ID {
			t.Errorf("the conflicting row of the batch holds %d, want %d", batch[1].ID, first.ID)
		}
	})

	t.Run("UpdateAll on another column", func(t *testing.T) {
		a := Account{Email: "bob@example.com", Name: "Robert"}
		if err := db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "email"}}, UpdateAll: true}).Create(&a).Error; err != nil {
			t.Fatal(err)
		}
		if want := accountIDs(t, e)["bob@example.com"]; a.ID != want {
			t.Errorf("UpdateAll upsert: struct %d, row %d", a.ID, want)
		}
	})

	t.Run("a RETURNING clause of the caller's own", func(t *testing.T) {
		a := Account{Email: "cy@example.com", Name: "Cyrus"}
		err := db.Clauses(byEmail, clause.Returning{Columns: []clause.Column{{Name: "name"}}}).Create(&a).Error
		if err != nil {
			t.Fatal(err)
		}
		if want := accountIDs(t, e)["cy@example.com"]; a.ID != want || a.Name != "Cyrus" {
			t.Errorf("upsert with RETURNING name: %+v, row key %d", a, want)
		}
	})

	t.Run("conflict on the key itself", func(t *testing.T) {
		a := Account{ID: first.ID, Email: "ada@example.com", Name: "Ada 4"}
		err := db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, UpdateAll: true}).Create(&a).Error
		if err != nil || a.ID != first.ID {
			t.Errorf("upsert on the key: %v, key %d", err, a.ID)
		}
		// Save of a slice is that upsert too.
		batch := []Account{{ID: first.ID, Email: "ada@example.com", Name: "Ada 5"}, {Email: "dee@example.com"}}
		if err := db.Save(&batch).Error; err != nil {
			t.Fatal(err)
		}
		rows := accountIDs(t, e)
		if batch[0].ID != first.ID || batch[1].ID == 0 || rows["dee@example.com"] != batch[1].ID {
			t.Errorf("Save of a slice: %+v, rows %v", batch, rows)
		}
	})

	t.Run("DO NOTHING", func(t *testing.T) {
		// Documented: the struct keeps the key the plugin gave it, which no
		// row has; RowsAffected tells that nothing was inserted.
		a := Account{Email: "ada@example.com", Name: "ignored"}
		res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&a)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		if res.RowsAffected != 0 {
			t.Errorf("RowsAffected = %d, want 0", res.RowsAffected)
		}
		if a.ID == 0 || a.ID == first.ID {
			t.Errorf("DO NOTHING: struct key %d; want the plugin's key (not the row's %d)", a.ID, first.ID)
		}
		if e.keys(t, "accounts", "id")[a.ID] {
			t.Errorf("key %d of a row that was not inserted is in the table", a.ID)
		}
		// A batch: RowsAffected counts the rows inserted.
		batch := []Account{{Email: "ada@example.com"}, {Email: "eve@example.com"}}
		res = db.Clauses(clause.OnConflict{DoNothing: true}).Create(&batch)
		if res.Error != nil || res.RowsAffected != 1 {
			t.Errorf("DO NOTHING batch: %v, RowsAffected %d, want 1", res.Error, res.RowsAffected)
		}
		if rows := accountIDs(t, e); rows["eve@example.com"] != batch[1].ID {
			t.Errorf("the inserted row of the batch: struct %d, row %d", batch[1].ID, rows["eve@example.com"])
		}
	})
}
