package workerid

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// opRecorder is an Observer that sends what it heard on events, and
// checks that End gets the context Start returned and that Start knew
// the worker it was told at End (for a renewal).
type opRecorder struct {
	events chan string
}

type opKey struct{}

func (r *opRecorder) Start(ctx context.Context, op Op, worker int64) context.Context {
	return context.WithValue(ctx, opKey{}, fmt.Sprintf("%s %d", op, worker))
}

func (r *opRecorder) End(ctx context.Context, op Op, worker int64, err error) {
	start, _ := ctx.Value(opKey{}).(string)
	outcome := "ok"
	switch {
	case errors.Is(err, ErrStore):
		outcome = "store error"
	case errors.Is(err, ErrNoFreeWorker):
		outcome = "no free worker"
	case err != nil:
		outcome = err.Error()
	}
	r.events <- fmt.Sprintf("%s %d %s (started as %s)", op, worker, outcome, start)
}

// TestObserver: Options.Observer hears of each Acquire, with the number
// it took or -1, and of each renewal on the lease's goroutine, confirmed
// or failed, each with the context its Start returned. The lease is
// renewed through a proxy that the test cuts to fail a renewal.
func TestObserver(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	px := startProxy(t, testenv.Redis(t))
	rec := &opRecorder{events: make(chan string, 100)}
	p := redisPool(t, px.Addr(), testenv.KeyPrefix(t), Options{Layout: sixBits, Reserved: allBut(sixBits, 9), Observer: rec})
	next := func() string {
		t.Helper()
		select {
		case e := <-rec.events:
			return e
		case <-ctx.Done():
			t.Fatal("no event")
			return ""
		}
	}

	// Renewals run on the lease's goroutine from the take on, also while
	// Acquire waits out a number without a record: confirmed ones may
	// come between the others.
	const renewed = "renew 9 ok (started as renew 9)"
	renewals := 0
	nextOther := func() string {
		t.Helper()
		for {
			if e := next(); e != renewed {
				return e
			}
			renewals++
		}
	}

	l, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	if got, want := nextOther(), "acquire 9 ok (started as acquire -1)"; got != want {
		t.Errorf("Acquire: observed %q, want %q", got, want)
	}
	if _, err := p.Acquire(ctx); !errors.Is(err, ErrNoFreeWorker) {
		t.Fatalf("a second Acquire of the one number: %v", err)
	}
	if got, want := nextOther(), "acquire -1 no free worker (started as acquire -1)"; got != want {
		t.Errorf("a failed Acquire: observed %q, want %q", got, want)
	}
	for renewals == 0 {
		if got := next(); got != renewed {
			t.Fatalf("waiting for a renewal: observed %q", got)
		}
		renewals++
	}
	px.Cut()
	if got, want := nextOther(), "renew 9 store error (started as renew 9)"; got != want {
		t.Errorf("a renewal through a cut connection: observed %q, want %q", got, want)
	}
}
