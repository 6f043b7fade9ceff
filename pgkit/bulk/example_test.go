package bulk_test

import (
	"context"
	"fmt"
	"iter"
	"log"
	"os"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/pgkit/bulk"
)

type (
	Author struct {
		ID        idtype.ID `gorm:"primaryKey"`
		Name      string
		Books     []Book
		CreatedAt time.Time
	}
	Book struct {
		ID       idtype.ID `gorm:"primaryKey"`
		AuthorID idtype.ID `gorm:"index"`
		Title    string
	}
)

// Load authors and their books with COPY, in one transaction. (It needs a
// database, so go test only compiles it.)
func ExampleCreate() {
	ctx := context.Background()
	db, err := gorm.Open(postgres.Open(os.Getenv("DATABASE_URL")))
	if err != nil {
		log.Fatal(err)
	}
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		log.Fatal(err)
	}
	authors := []Author{
		{Name: "Ann", Books: []Book{{Title: "One"}, {Title: "Two"}}},
		{Name: "Bob", Books: []Book{{Title: "Three"}}},
	}
	res, err := bulk.Create(ctx, db, gen, authors, bulk.Options{})
	if err != nil {
		log.Fatal(err)
	}
	// The structs hold their keys, and the books their authors'.
	fmt.Println(res.Tables["authors"], res.Tables["books"], authors[0].Books[1].AuthorID == authors[0].ID)
}

// Load rows as they are read, a batch at a time: memory stays bounded by
// the batch, whatever the number of rows.
func ExampleCreateSeq() {
	ctx := context.Background()
	db, err := gorm.Open(postgres.Open(os.Getenv("DATABASE_URL")))
	if err != nil {
		log.Fatal(err)
	}
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		log.Fatal(err)
	}
	var rows iter.Seq[*Author] = func(yield func(*Author) bool) {
		for i := range 1000000 {
			if !yield(&Author{Name: fmt.Sprint("author ", i)}) {
				return
			}
		}
	}
	res, err := bulk.CreateSeq(ctx, db, gen, rows, bulk.Options{BatchSize: 5000})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Rows)
}
