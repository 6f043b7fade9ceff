package tokens

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// recorder is an Observer that keeps what it heard, and checks that End
// gets the context Start returned.
type recorder struct {
	mu     sync.Mutex
	events []string
}

type startKey struct{}

func (r *recorder) Start(ctx context.Context, op Op) context.Context {
	return context.WithValue(ctx, startKey{}, op)
}

func (r *recorder) End(ctx context.Context, op Op, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := string(op)
	if ctx.Value(startKey{}) != op {
		e += " (not Start's context)"
	}
	switch {
	case err == nil:
		e += " ok"
	case errors.Is(err, ErrInvalidToken):
		e += " invalid"
	default:
		e += " error"
	}
	r.events = append(r.events, e)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// TestObserver: every call of a Manager on real Redis, and the
// middleware's Validate, reaches Options.Observer once, with the context
// its Start returned and the call's outcome.
func TestObserver(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	rec := &recorder{}
	gen := newGen(t)
	m := openManager(t, testenv.RedisClient(t), gen, Options{Observer: rec})
	user := userID(t, gen)

	tok, _, err := m.Issue(ctx, user, Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Validate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Validate(ctx, tok+"x"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Validate of a bad token: %v", err)
	}
	tok2, _, err := m.Rotate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Revoke(ctx, tok2); err != nil {
		t.Fatal(err)
	}
	_, s3, err := m.Issue(ctx, user, Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RevokeSession(ctx, user, s3.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RevokeAll(ctx, user); err != nil {
		t.Fatal(err)
	}
	want := []string{"issue ok", "validate ok", "validate invalid", "rotate ok", "revoke ok", "issue ok", "revoke_session ok", "revoke_all ok"}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}

	srv := httptest.NewServer(m.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	defer srv.Close()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok2)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := rec.take(); !slices.Equal(got, []string{"validate invalid"}) || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the middleware on a revoked token: status %d, observed %v; want 401 and [validate invalid]", resp.StatusCode, got)
	}
}
