package adopt_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/snowkeyhq/snowkey/pgkit/adopt"
)

// Plan the adoption of two tables, print the SQL and its locks, and apply
// it. (It needs a database, so go test only compiles it.)
func ExampleNewPlan() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	plan, err := adopt.NewPlan(ctx, db, []string{"users", "posts"}, adopt.Options{})
	if err != nil {
		log.Fatal(err) // a refusal names every problem it found
	}
	fmt.Print(plan.SQL())
	if err := plan.Apply(ctx, db); err != nil {
		log.Fatal(err)
	}
}
