package main

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// dbKind is the database a DATABASE_URL names.
type dbKind struct {
	postgres bool
	path     string // SQLite file; "" for memory
	server   string // PostgreSQL's user, host, port and database, for logs
}

// databaseKind reads a DATABASE_URL: a postgres:// or postgresql:// URL,
// or a key=value connection string, for PostgreSQL; sqlite:PATH for an
// SQLite file; empty for SQLite in memory. PostgreSQL's settings are read
// by pgx's own parser, which the connection will use too; what the
// server logs of them is built from the fields it read, never from the
// string, so no form of password reaches a log line.
func databaseKind(s string) (dbKind, error) {
	switch {
	case s == "":
		return dbKind{}, nil
	case strings.HasPrefix(s, "sqlite:"):
		p := strings.TrimPrefix(s, "sqlite:")
		if p == "" || strings.ContainsAny(p, "?#") {
			return dbKind{}, fmt.Errorf("%w: DATABASE_URL %q: want sqlite:PATH, a file path without '?' or '#'", ErrConfig, s)
		}
		return dbKind{path: p}, nil
	case !isPostgresURL(s):
		return dbKind{}, fmt.Errorf("%w: DATABASE_URL: want a postgres:// URL, a key=value connection string or sqlite:PATH", ErrConfig)
	}
	c, err := pgconn.ParseConfig(s)
	if err != nil {
		return dbKind{}, fmt.Errorf("%w: DATABASE_URL: %s", ErrConfig, parseErrorText(s, err))
	}
	server := fmt.Sprintf("user=%s host=%s port=%d database=%s", c.User, c.Host, c.Port, c.Database)
	if n := len(c.Fallbacks); n > 0 {
		server += fmt.Sprintf(" (and %d fallback hosts)", n)
	}
	return dbKind{postgres: true, server: server}, nil
}

func (k dbKind) describe() string {
	switch {
	case k.postgres:
		return "PostgreSQL " + k.server
	case k.path != "":
		return "embedded SQLite file " + k.path
	default:
		return "embedded SQLite in memory (data ends with the process; set DATABASE_URL for PostgreSQL)"
	}
}

// openDatabase opens the database, applies the migrations and checks the
// connection.
func (a *App) openDatabase(ctx context.Context, dsn string, kind dbKind) (*gorm.DB, error) {
	gcfg := &gorm.Config{
		// Unique violations become gorm.ErrDuplicatedKey on both databases.
		TranslateError: true,
		Logger: logger.NewSlogLogger(a.log, logger.Config{
			SlowThreshold:             200 * time.Millisecond,
			LogLevel:                  logger.Warn,
			IgnoreRecordNotFoundError: true,
			ParameterizedQueries:      true, // never log a password hash
		}),
	}
	var dialector gorm.Dialector
	switch {
	case kind.postgres:
		dialector = postgres.Open(dsn)
	case kind.path != "":
		dialector = sqlite.Open("file:" + kind.path +
			"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	default:
		// Each connection to ":memory:" would be a database of its own,
		// so there is one connection (set below).
		dialector = sqlite.Open("file::memory:?_pragma=foreign_keys(1)")
	}
	db, err := gorm.Open(dialector, gcfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", kind.describe(), err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	a.onClose(closeFunc(sqlDB))
	if !kind.postgres {
		sqlDB.SetMaxOpenConns(1)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", kind.describe(), err)
	}
	if err := migrate(ctx, db, kind, a.log); err != nil {
		return nil, err
	}
	if kind.postgres {
		if err := a.keepPostsPartitioned(ctx, sqlDB); err != nil {
			return nil, err
		}
	}
	return db, nil
}

// keepPostsPartitioned makes the posts table's partitions on PostgreSQL
// before the server takes a request, so that this month's posts land in
// this month's partition, not the default one, and keeps them made from
// then on: Run maintains every hour in the background until Close. Every
// instance does it; the maintenance's advisory lock makes that safe.
//
// A database upgraded by migration 00003 has all its old posts in the
// default partition: Maintain makes each of their months' partitions and
// moves them there. Posts that other rows refer to stay in the default
// partition when the database role may not set session_replication_role;
// they are logged, and stay readable.
func (a *App) keepPostsPartitioned(ctx context.Context, sqlDB *sql.DB) error {
	parts, err := postsPartitioner(a.layout, nil, a.log)
	if err != nil {
		return err
	}
	rep, err := maintainPartitions(ctx, parts, sqlDB)
	if err != nil {
		return fmt.Errorf("partitions of %s: %w", postsTable, err)
	}
	if len(rep.Created) > 0 {
		a.log.Info("partitions made", "table", postsTable, "created", rep.Created, "moved_rows", rep.Moved)
	}
	for _, l := range rep.Left {
		a.log.Warn("posts left in the default partition", "table", postsTable, "left", l.String())
	}
	// Run outlives Open's context: it stops when Close cancels its own.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runPartitions(runCtx, parts, sqlDB) // ends with runCtx's error; it logs the others itself
	}()
	a.onClose(func(ctx context.Context) error {
		cancel()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("partitions of %s: maintenance did not stop: %w", postsTable, ctx.Err())
		}
	})
	return nil
}

// appMigrations are the example's own migrations for PostgreSQL, in
// goose's SQL format.
//
//go:embed migrations/*.sql
var appMigrations embed.FS

// appVersionTable and appLockKey keep the example's migrations apart from
// snowkey's (migrations.VersionTable, migrations.MigrationLockKey): an
// app has migrations of its own, applied after the library's, with their
// own version table and advisory lock.
const (
	appVersionTable = "example_db_version"
	appLockKey      = 7239410365541862351
)

// appMigrationProvider returns the goose provider of the example's own
// migrations on db, under their advisory lock and version table.
func appMigrationProvider(db *sql.DB) (*goose.Provider, error) {
	files, err := fs.Sub(appMigrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(appLockKey))
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files,
		goose.WithTableName(appVersionTable), goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}

// migrate brings the schema up to date. On PostgreSQL it applies
// snowkey's migrations (snowflake_id() and the worker-lease table), then
// the example's own SQL files, each set under its own advisory lock, so
// that instances starting together are safe. On SQLite, which the SQL
// files (PL/pgSQL) do not fit, GORM's AutoMigrate makes the same tables
// from the models.
func migrate(ctx context.Context, db *gorm.DB, kind dbKind, log *slog.Logger) error {
	if !kind.postgres {
		if err := db.WithContext(ctx).AutoMigrate(snowflakeModels()...); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	if err := migrateLibrary(ctx, sqlDB); err != nil {
		return err
	}
	p, err := appMigrationProvider(sqlDB)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		log.Info("migration applied", "source", r.Source.Path, "duration", r.Duration)
	}
	return nil
}
