package gormplugin_test

import (
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
)

// TestKeyFields: KeyFields names the fields the plugin fills, with and
// without OnlyTagged, and refuses a tagged field that is no 64-bit integer.
func TestKeyFields(t *testing.T) {
	type (
		both struct {
			ID     idtype.ID `gorm:"primaryKey"`
			Public int64     `gorm:"snowflake"`
			Name   string
		}
		bad struct {
			ID   idtype.ID `gorm:"primaryKey"`
			Code string    `gorm:"snowflake"`
		}
	)
	db := dryRun()
	names := func(model any, onlyTagged bool) ([]string, error) {
		stmt := &gorm.Statement{DB: db}
		if err := stmt.Parse(model); err != nil {
			t.Fatal(err)
		}
		fields, err := gormplugin.KeyFields(stmt.Schema, onlyTagged)
		var out []string
		for _, f := range fields {
			out = append(out, f.Name)
		}
		return out, err
	}
	if got, err := names(&both{}, false); err != nil || len(got) != 2 || got[0] != "ID" || got[1] != "Public" {
		t.Errorf("KeyFields = %v, %v; want [ID Public]", got, err)
	}
	if got, err := names(&both{}, true); err != nil || len(got) != 1 || got[0] != "Public" {
		t.Errorf("KeyFields, only tagged = %v, %v; want [Public]", got, err)
	}
	if _, err := names(&bad{}, false); !errors.Is(err, gormplugin.ErrFieldType) {
		t.Errorf("a tagged string: %v; want ErrFieldType", err)
	}
}
