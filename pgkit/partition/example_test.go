package partition_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/pgkit/partition"
)

// An app keeps its events by day for 90 days: the table is made once,
// partitioned by its key, and every instance keeps it in the background.
func ExampleNew() {
	ctx := context.Background()
	sqlDB, err := sql.Open("pgx", "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	gormDB, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}))
	if err != nil {
		log.Fatal(err)
	}
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		log.Fatal(err)
	}
	if err := gormDB.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		log.Fatal(err)
	}

	type Event struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Kind string
	}
	parts, err := partition.New("events", gen.Layout(), partition.Options{
		Period:    partition.Day,
		Retention: 90 * 24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := parts.Create(ctx, gormDB, &Event{}); err != nil {
		log.Fatal(err)
	}
	go func() { _ = parts.Run(ctx, sqlDB) }() // returns when ctx ends

	// A day's events, read from that day's partition alone.
	from, to := parts.Bounds(time.Now().AddDate(0, 0, -1))
	var events []Event
	gormDB.Where("id >= ? AND id < ?", from, to).Find(&events)
}

// Bounds and PartitionName say which partition holds a time, and the key
// range that reads it alone.
func ExampleTable_Bounds() {
	parts, err := partition.New("events", idtype.DefaultLayout, partition.Options{Period: partition.Week})
	if err != nil {
		log.Fatal(err)
	}
	at := time.Date(2025, 3, 13, 15, 4, 5, 0, time.UTC) // a Thursday
	from, to := parts.Bounds(at)
	fmt.Println(parts.PartitionName(at))
	fmt.Println(from.Time(), to.Time())
	fmt.Printf("WHERE id >= %d AND id < %d\n", from, to)
	// Output:
	// events_p20250310
	// 2025-03-10 00:00:00 +0000 UTC 2025-03-17 00:00:00 +0000 UTC
	// WHERE id >= 1898886517355446272 AND id < 1901423232414646272
}

// A maintenance job outside the app (a cron job, say) runs Maintain once
// and says what it could not do: rows it left in the default partition
// and expired partitions it kept, each with why.
func ExampleTable_Maintain() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	parts, err := partition.New("events", idtype.DefaultLayout, partition.Options{Retention: 90 * 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := parts.Maintain(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("made %v, removed %v, moved %d rows; the database's clock %v, ours %v off\n",
		rep.Created, rep.Removed, rep.Moved, rep.DatabaseTime, rep.ClockSkew)
	for _, l := range rep.Left {
		fmt.Println(l) // e.g. rows that other rows refer to: ErrReferenced
	}
	for _, k := range rep.Kept {
		fmt.Println(k)
	}
}
