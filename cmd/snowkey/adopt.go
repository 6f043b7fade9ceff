package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/snowkeyhq/snowkey/pgkit/adopt"
)

const adoptHelp = `Usage: snowkey adopt [flags] <table>...

Moves the tables' serial, bigserial or identity primary keys onto
snowflakes (adopt.NewPlan): widens the keys and every foreign-key column
that holds them to bigint, replaces the keys' defaults with snowflake_id()
(or drops them, --app-keys) and detaches the old sequences, keeping every
row and constraint. It prints the SQL it would run, each statement with the
locks it takes, asks, and applies it in one transaction.

snowflake_id() must be installed (migrations.Up) unless --app-keys. Every
existing key must be below the first key new rows would get now: those of
snowflake_id() (the default layout, on the database's clock; unless
--app-keys), and those of the app, whose layout the layout flags name.

A BEFORE INSERT trigger that adopt cannot prove leaves the key alone is
refused; once you have read it, name it with --allow-trigger
table.trigger (as often as needed).

`

// adoptCmd is 'snowkey adopt'. It reads the confirmation from stdin.
func adoptCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("adopt", adoptHelp)
	database := fs.String("database", "", "PostgreSQL URL (default $DATABASE_URL)")
	dryRun := fs.Bool("dry-run", false, "print the SQL and the locks it takes; change nothing")
	yes := fs.Bool("yes", false, "apply without asking")
	appKeys := fs.Bool("app-keys", false, "drop the keys' defaults instead of setting snowflake_id(): the app brings every key")
	lockTimeout := fs.Duration("lock-timeout", adopt.DefaultLockTimeout, "give up when a lock takes longer than this")
	var allow names
	fs.Var(&allow, "allow-trigger", "a BEFORE INSERT trigger, table.trigger, that you vouch leaves the key alone (repeatable)")
	layout := layoutFlags(fs)
	tables, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err // flag.ErrHelp after the help, or a usage error
	}
	l, err := layout()
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		return fmt.Errorf("%w: name the tables to adopt", errUsage)
	}
	if *lockTimeout <= 0 {
		return fmt.Errorf("%w: --lock-timeout %v is not positive", errUsage, *lockTimeout)
	}
	url := *database
	if url == "" {
		url = os.Getenv("DATABASE_URL")
	}
	if url == "" {
		return fmt.Errorf("%w: no database: pass --database or set DATABASE_URL", errUsage)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	db, err := sql.Open("pgx", url)
	if err != nil {
		return fmt.Errorf("%w: --database: %v", errUsage, err)
	}
	defer db.Close()
	plan, err := adopt.NewPlan(ctx, db, tables, adopt.Options{AppKeys: *appKeys, LockTimeout: *lockTimeout, Layout: l,
		AllowTriggers: allow})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, plan.SQL())
	if *dryRun || len(plan.Steps) == 0 {
		return nil
	}
	if !*yes {
		fmt.Fprint(stderr, "Apply? Type yes to go on: ")
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "yes" && a != "y" {
			return errors.New("not applied")
		}
	}
	if err := plan.Apply(ctx, db); err != nil {
		return err
	}
	fmt.Fprintln(stderr, "snowkey adopt: applied")
	return nil
}

// names is a flag that may be given more than once.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Set(v string) error {
	*n = append(*n, v)
	return nil
}
