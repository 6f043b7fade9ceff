package bulk

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

// load is one call of Create or CreateSeq.
//
// Two goroutines share it: the caller's reads the input and prepares
// each batch (collects its rows, takes their IDs, sets their foreign
// keys), while a copier sends the batch before it. Preparing is the
// client's work that COPY cannot overlap by itself, and the server would
// sit idle through it. The caller's goroutine owns src and ids; the
// copier owns conn's COPYs, vals, result and undo until it has ended.
type load struct {
	ctx      context.Context
	db       *gorm.DB
	src      idtype.Source
	o        Options
	defences defences // zero: every defence on; only export_test.go turns one off
	plan     *loadPlan
	model    reflect.Type // the input's struct type
	conn     *pgx.Conn
	// track keeps the addresses of rows that may be shared: only a
	// belongs-to or many2many row is likely to be shared by several rows
	// (or to be an input row as well); without such associations no
	// address is kept.
	track  bool
	ids    []idtype.ID
	vals   []any
	result Result
	// undo is what the load wrote into the caller's structs, put back if
	// it fails (see undo.go).
	undo undoLog
	// commitUnknown is true when the COMMIT got no answer: the rows may
	// be written, and the structs keep their keys (ErrCommitUnknown).
	commitUnknown bool
}

func newLoad[T any](ctx context.Context, db *gorm.DB, src idtype.Source, opts Options, d defences, streamed bool) (*load, error) {
	o, err := opts.check()
	if err != nil {
		return nil, err
	}
	model := reflect.TypeFor[T]()
	for model.Kind() == reflect.Pointer {
		model = model.Elem()
	}
	switch {
	case db == nil:
		return nil, fmt.Errorf("%w: db is nil", ErrConn)
	case src == nil:
		return nil, fmt.Errorf("%w: src is nil", ErrGenerate)
	case model.Kind() != reflect.Struct:
		return nil, fmt.Errorf("%w: rows of %s: want structs or pointers to structs", ErrModel, reflect.TypeFor[T]())
	case len(db.Statement.Selects) > 0 || len(db.Statement.Omits) > 0:
		return nil, fmt.Errorf("%w: db has Select or Omit, which a bulk load does not take: it writes every column Create would", ErrModel)
	}
	plan, err := newLoadPlan(db, model, o, d)
	if err != nil {
		return nil, err
	}
	l := &load{ctx: ctx, db: db, src: src, o: o, defences: d, plan: plan, model: model,
		result: Result{Tables: map[string]int64{}}, undo: undoLog{streamed: streamed}}
	for _, n := range plan.nodes {
		for _, r := range n.rels {
			l.track = l.track || r.rel.Type == schema.BelongsTo || r.rel.Type == schema.Many2Many
		}
	}
	return l, nil
}

// run loads every row that input yields, in batches, in one transaction:
// this goroutine prepares batch k+1 while a copier sends batch k. At most
// two batches exist at a time. When the load fails, run puts back what it
// wrote into the caller's structs, unless the COMMIT got no answer.
func (l *load) run(ctx context.Context, input func(yield func(reflect.Value) error) error) error {
	err := l.inTx(ctx, l.batches(input))
	if err != nil && !l.defences.keepStructs && (!l.commitUnknown || l.defences.restoreUnknownCommit) {
		l.undo.restore()
	}
	return err
}

// batches returns the work of run inside the transaction.
func (l *load) batches(input func(yield func(reflect.Value) error) error) func() error {
	return func() error {
		full := make(chan *batch)
		free := make(chan *batch, 2)
		free <- l.newBatch()
		free <- l.newBatch()
		var (
			mu      sync.Mutex
			copyErr error
		)
		failed := func() error {
			mu.Lock()
			defer mu.Unlock()
			return copyErr
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for b := range full {
				// After a failure the rest are only handed back: the
				// transaction is lost anyway.
				if failed() == nil {
					if err := b.copyAll(); err != nil {
						mu.Lock()
						copyErr = err
						mu.Unlock()
					}
				}
				l.undo.flush(b, failed() == nil)
				b.reset()
				free <- b
			}
		})

		b := <-free
		send := func() error {
			if err := b.prepare(); err != nil {
				return err
			}
			full <- b
			b = <-free
			return failed()
		}
		n := 0
		err := input(func(v reflect.Value) error {
			for v.Kind() == reflect.Pointer {
				if v.IsNil() {
					return fmt.Errorf("%w: row %d is a nil pointer", ErrModel, n)
				}
				v = v.Elem()
			}
			b.addRoot(v, n)
			n++
			if b.roots >= l.o.BatchSize && !l.defences.unbounded {
				return send()
			}
			return nil
		})
		if err == nil && b.roots > 0 {
			err = send()
		}
		close(full)
		wg.Wait()
		if err == nil {
			err = failed()
		}
		// The batch this goroutine held: prepared in part when the
		// input or prepare failed, empty otherwise.
		l.undo.flush(b, false)
		return err
	}
}

// inTx runs fn with l.conn set, in a transaction: the caller's (in a
// savepoint) or one of its own on a connection of db's pool.
func (l *load) inTx(ctx context.Context, fn func() error) error {
	if l.o.Tx != nil {
		sp, err := l.o.Tx.Begin(ctx)
		if err != nil {
			return fmt.Errorf("bulk: savepoint: %w", err)
		}
		l.conn = sp.Conn()
		// A failed RELEASE leaves the caller's transaction uncommitted,
		// so the load's rows are not written, whatever its answer.
		_, err = finish(ctx, sp, fn())
		return err
	}
	pool := l.db.Statement.ConnPool
	if pool == nil {
		pool = l.db.ConnPool
	}
	var sqlDB *sql.DB
	switch p := pool.(type) {
	case *sql.DB:
		sqlDB = p
	case gorm.TxCommitter:
		return fmt.Errorf("%w: db is in a database/sql transaction, whose connection is out of reach; "+
			"load outside it, or in a pgx transaction passed as Options.Tx", ErrConn)
	case gorm.GetDBConnector:
		var err error
		if sqlDB, err = p.GetDBConn(); err != nil {
			return fmt.Errorf("%w: %w", ErrConn, err)
		}
	default:
		return fmt.Errorf("%w: db's connection pool is a %T", ErrConn, pool)
	}
	c, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("bulk: connect: %w", err)
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: db's driver connection is a %T, not pgx's (gorm.io/driver/postgres uses pgx)", ErrConn, dc)
		}
		l.conn = sc.Conn()
		if l.defences.noTx {
			return fn()
		}
		tx, err := l.conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("bulk: begin: %w", err)
		}
		l.commitUnknown, err = finish(ctx, tx, fn())
		return err
	})
}

// finish commits tx when err is nil and rolls it back otherwise. unknown
// is true when the COMMIT was sent and got no answer, and the error then
// wraps ErrCommitUnknown: the server may have committed. A COMMIT that the
// server refused (a deferred constraint) rolled back.
func finish(ctx context.Context, tx pgx.Tx, err error) (unknown bool, _ error) {
	if err == nil {
		// A COMMIT under an ended context may or may not be sent; the
		// load rolls back instead, and knows it did.
		err = ctx.Err()
	}
	if err != nil {
		// The load may have failed because ctx ended; the rollback still
		// gets a few seconds, so the connection goes back to the pool clean.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		// pgconn.SafeToRetry cannot tell: a connection that broke while
		// the COMMIT's answer was awaited is reported as one that was
		// closed before it was sent.
		var pgErr *pgconn.PgError
		if errors.Is(err, pgx.ErrTxCommitRollback) || errors.As(err, &pgErr) && pgErr.Severity == "ERROR" {
			return false, fmt.Errorf("bulk: commit: %w", err)
		}
		return true, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	}
	return false, nil
}
