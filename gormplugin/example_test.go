package gormplugin_test

import (
	"fmt"
	"log"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
)

// dryRun opens GORM on PostgreSQL in dry-run mode: statements are built,
// not sent, so the examples run without a server.
func dryRun() *gorm.DB {
	db, err := gorm.Open(postgres.New(postgres.Config{DSN: "host=localhost"}),
		&gorm.Config{DryRun: true, DisableAutomaticPing: true, SkipDefaultTransaction: true, Logger: logger.Discard})
	if err != nil {
		log.Fatal(err)
	}
	return db
}

func Example() {
	db := dryRun() // gorm.Open(postgres.Open(dsn)) in a real app

	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		log.Fatal(err)
	}

	type Post struct {
		ID    idtype.ID // the primary key: filled by the plugin
		Title string
	}
	p := Post{Title: "hello"}
	stmt := db.Create(&p).Statement
	fmt.Println(p.ID != 0, idtype.DefaultLayout.Decode(p.ID).Worker)
	fmt.Println(stmt.SQL.String())

	// A batch takes its keys with one reservation, in slice order.
	batch := []Post{{Title: "a"}, {Title: "b"}, {Title: "c"}}
	db.Create(&batch)
	fmt.Println(batch[0].ID < batch[1].ID && batch[1].ID < batch[2].ID)
	// Output:
	// true 7
	// INSERT INTO "posts" ("id","title") VALUES ($1,$2)
	// true
}

// A field that is not the key can be a snowflake too: tag it.
func Example_tagged() {
	db := dryRun()
	gen, _ := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	_ = db.Use(gormplugin.New(gen, gormplugin.Options{}))

	type Order struct {
		ID     idtype.ID
		Number int64 `gorm:"snowflake;uniqueIndex"` // a public order number
	}
	o := Order{}
	db.Create(&o)
	fmt.Println(o.ID != 0, o.Number != 0, o.Number > int64(o.ID))
	// Output: true true true
}

// An upsert whose conflict target is not the key gets RETURNING "id", so
// the struct ends up with the key of the row that really exists.
func Example_upsert() {
	db := dryRun()
	gen, _ := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	_ = db.Use(gormplugin.New(gen, gormplugin.Options{}))

	type Account struct {
		ID    idtype.ID
		Email string `gorm:"uniqueIndex"`
		Name  string
	}
	a := Account{Email: "ada@example.com", Name: "Ada"}
	stmt := db.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "email"}},
		DoUpdates: clause.AssignmentColumns([]string{"name"}),
	}).Create(&a).Statement
	fmt.Println(stmt.SQL.String())
	// Output:
	// INSERT INTO "accounts" ("id","email","name") VALUES ($1,$2,$3) ON CONFLICT ("email") DO UPDATE SET "name"="excluded"."name" RETURNING "id"
}

// A key with a database default is left to the database, which fills it
// with snowflake_id() (see package migrations); GORM reads it back.
func Example_databaseDefault() {
	db := dryRun()
	gen, _ := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	_ = db.Use(gormplugin.New(gen, gormplugin.Options{}))

	type Audit struct {
		ID   idtype.ID `gorm:"primaryKey;default:snowflake_id()"`
		What string
	}
	a := Audit{What: "login"}
	stmt := db.Create(&a).Statement
	fmt.Println(a.ID, stmt.SQL.String())
	// Output:
	// 0 INSERT INTO "audits" ("what") VALUES ($1) RETURNING "id"
}
