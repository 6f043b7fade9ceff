package history

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// hist builds a history by hand: times are milliseconds after t0.
type hist struct {
	h  *History
	t0 time.Time
}

func newHist() *hist {
	h := New(nil)
	return &hist{h: h, t0: h.t0}
}

func (b *hist) at(ms int) time.Time { return b.t0.Add(time.Duration(ms) * time.Millisecond) }

// op adds an operation that ran from start to end (end < 0: pending).
func (b *hist) op(op Op, start, end int, out Outcome) *hist {
	op.Index = len(b.h.ops)
	op.Start = b.at(start)
	if end >= 0 {
		op.End = b.at(end)
	}
	op.Outcome = out
	b.h.ops = append(b.h.ops, op)
	return b
}

func (b *hist) window(from, to int) *hist {
	w := window{from: b.at(from)}
	if to >= 0 {
		w.to = b.at(to)
	}
	b.h.windows = append(b.h.windows, w)
	return b
}

// withSession: user 1's session s, issued on m1 in [0, 1].
func withSession(s int64) *hist {
	return newHist().op(Op{Kind: Issue, Manager: 1, User: 1, Session: s}, 0, 1, OK)
}

func validate(m int, s int64) Op { return Op{Kind: Validate, Manager: m, Session: s} }

func TestCheckTokens(t *testing.T) {
	ttl := func(m int) time.Duration {
		if m == 2 {
			return 100 * time.Millisecond
		}
		return 0
	}
	tests := []struct {
		name string
		h    *hist
		want []string // the rules broken, in order
	}{
		// Must violate.
		{"same manager after revoke", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, OK).
			op(validate(1, 10), 13, 14, OK), []string{ruleRevoked}},
		{"same manager, cache would not excuse it", withSession(10).
			op(Op{Kind: Revoke, Manager: 2, Session: 10}, 10, 12, OK).
			op(validate(2, 10), 13, 14, OK), []string{ruleRevoked}},
		{"other manager past its CacheTTL", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, OK).
			op(validate(2, 10), 113, 114, OK), []string{ruleRevoked}},
		{"other manager without cache", withSession(10).
			op(Op{Kind: Revoke, Manager: 2, Session: 10}, 10, 12, OK).
			op(validate(1, 10), 13, 14, OK), []string{ruleRevoked}},
		{"RevokeSession", withSession(10).
			op(Op{Kind: RevokeSession, Manager: 1, User: 1, Session: 10}, 10, 12, OK).
			op(validate(1, 10), 20, 21, OK), []string{ruleRevoked}},
		{"RevokeAll", withSession(10).
			op(Op{Kind: RevokeAll, Manager: 1, User: 1, Keep: []int64{11}}, 10, 12, OK).
			op(validate(3, 10), 20, 21, OK), []string{ruleRevoked}},
		{"Rotate revokes the old session", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(validate(1, 20), 20, 21, OK).
			op(validate(1, 10), 20, 21, OK), []string{ruleRevoked}},
		{"RevokeAll covers a rotated session", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(Op{Kind: RevokeAll, Manager: 1, User: 1}, 15, 16, OK).
			op(validate(1, 20), 20, 21, OK), []string{ruleRevoked}},
		{"a later successful revoke counts", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, Unavailable).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 20, 22, OK).
			op(validate(1, 10), 30, 31, OK), []string{ruleRevoked}},
		{"a rotated-out token served after a Revoke of it", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 13, 14, OK).
			op(Op{Kind: Validate, Manager: 1, Session: 10, Served: 20}, 20, 21, OK), []string{ruleRevoked}},
		{"a rotated-out token served after its successor's revocation", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(Op{Kind: RevokeSession, Manager: 1, User: 1, Session: 20}, 13, 14, OK).
			op(Op{Kind: Validate, Manager: 1, Session: 10, Served: 20}, 20, 21, OK), []string{ruleRevoked}},
		{"a rotated-out token served after RevokeAll", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(Op{Kind: RevokeAll, Manager: 1, User: 1}, 13, 14, OK).
			op(Op{Kind: Validate, Manager: 1, Session: 10, Served: 20}, 20, 21, OK), []string{ruleRevoked}},
		{"a token served as a session no Rotate made", withSession(10).
			op(Op{Kind: Validate, Manager: 1, Session: 10, Served: 99}, 20, 21, OK), []string{ruleNeverIssued}},
		{"served as a session a later lost Rotate may have made", withSession(10).
			op(Op{Kind: Validate, Manager: 1, Session: 10, Served: 99}, 20, 21, OK).
			op(Op{Kind: Rotate, Manager: 1, Session: 10}, 22, 23, Unavailable), []string{ruleNeverIssued}},
		{"never issued", withSession(10).op(validate(1, 99), 5, 6, OK), []string{ruleNeverIssued}},
		{"issue that failed", newHist().
			op(Op{Kind: Issue, Manager: 1, User: 1, Session: 10}, 0, 1, Unavailable).
			op(validate(1, 10), 5, 6, OK), []string{ruleNeverIssued}},
		{"wrong user", withSession(10).op(Op{Kind: Validate, Manager: 1, Session: 10, User: 2}, 5, 6, OK),
			[]string{ruleWrongUser}},
		{"unavailable while reads must work", withSession(10).window(5, 50).
			op(validate(1, 10), 20, 21, Unavailable), []string{ruleUnavailable}},
		{"unavailable in an open window", withSession(10).window(5, -1).
			op(validate(1, 10), 20, 21, Unavailable), []string{ruleUnavailable}},

		// Must not violate.
		{"validate concurrent with the revoke", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, OK).
			op(validate(1, 10), 11, 14, OK), nil},
		{"validate begun as the revoke returned", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, OK).
			op(validate(1, 10), 12, 14, OK), nil},
		{"other manager within its CacheTTL", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, OK).
			op(validate(2, 10), 111, 120, OK), nil},
		{"RevokeAll begun before the issue returned", newHist().
			op(Op{Kind: Issue, Manager: 1, User: 1, Session: 10}, 0, 10, OK).
			op(Op{Kind: RevokeAll, Manager: 1, User: 1}, 5, 12, OK).
			op(validate(1, 10), 20, 21, OK), nil},
		{"RevokeAll kept the session", withSession(10).
			op(Op{Kind: RevokeAll, Manager: 1, User: 1, Keep: []int64{10}}, 10, 12, OK).
			op(validate(1, 10), 20, 21, OK), nil},
		{"RevokeAll of another user", withSession(10).
			op(Op{Kind: RevokeAll, Manager: 1, User: 2}, 10, 12, OK).
			op(validate(1, 10), 20, 21, OK), nil},
		{"revoke failed", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, Unavailable).
			op(validate(1, 10), 20, 21, OK), nil},
		{"revoke pending", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, -1, Pending).
			op(validate(1, 10), 20, 21, OK), nil},
		{"rotate failed", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10}, 10, 12, OtherError).
			op(validate(1, 10), 20, 21, OK), nil},
		{"validate refused after revoke", withSession(10).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, OK).
			op(validate(1, 10), 20, 21, Invalid).
			op(validate(1, 10), 20, 21, Unavailable), nil},
		{"unavailable outside the window", withSession(10).window(5, 15).window(30, 40).
			op(validate(1, 10), 14, 21, Unavailable).
			op(validate(1, 10), 20, 21, Unavailable), nil},
		{"unavailable after a revoke was tried", withSession(10).window(0, -1).
			op(Op{Kind: Revoke, Manager: 1, Session: 10}, 10, 12, Unavailable).
			op(validate(1, 10), 11, 21, Unavailable), nil},
		{"unavailable after a RevokeAll was tried", withSession(10).window(0, -1).
			op(Op{Kind: RevokeAll, Manager: 2, User: 1}, 10, -1, Pending).
			op(validate(1, 10), 11, 21, Unavailable), nil},
		{"unavailable after a RevokeAll that returned as the issue began", newHist().window(0, -1).
			op(Op{Kind: RevokeAll, Manager: 2, User: 1}, 0, 5, OK).
			op(Op{Kind: Issue, Manager: 1, User: 1, Session: 10}, 5, 6, OK).
			op(validate(1, 10), 10, 11, Unavailable), nil},
		{"unavailable before the issue returned", newHist().window(0, -1).
			op(Op{Kind: Issue, Manager: 1, User: 1, Session: 10}, 0, 10, OK).
			op(validate(1, 10), 5, 21, Unavailable), nil},
		{"validate with user recorded, right user", withSession(10).
			op(Op{Kind: Validate, Manager: 1, Session: 10, User: 1}, 5, 6, OK), nil},
		{"a rotated-out token serves its successor", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(Op{Kind: Validate, Manager: 1, Session: 10, Served: 20, User: 1}, 20, 21, OK), nil},
		{"RevokeAll keeping the successor", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(Op{Kind: RevokeAll, Manager: 1, User: 1, Keep: []int64{20}}, 13, 14, OK).
			op(Op{Kind: Validate, Manager: 1, Session: 10, Served: 20}, 20, 21, OK), nil},
		{"served as the successor of a rotation whose answer was lost", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10}, 10, 12, Unavailable).
			op(Op{Kind: Validate, Manager: 1, Session: 10, Served: 30}, 20, 21, OK), nil},
		{"two rotations of one token agree", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(Op{Kind: Rotate, Manager: 2, Session: 10, NewSession: 20}, 11, 15, OK).
			op(Op{Kind: RevokeAll, Manager: 1, User: 1}, 13, 14, OK).
			op(validate(1, 20), 30, 31, Invalid), nil},
		{"rotated session keeps its user", withSession(10).
			op(Op{Kind: Rotate, Manager: 1, Session: 10, NewSession: 20}, 10, 12, OK).
			op(Op{Kind: Validate, Manager: 1, Session: 20, User: 1}, 20, 21, OK), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := CheckTokens(tt.h.h, ttl)
			if ref := checkTokensReference(&work{}, tt.h.h.ops, tt.h.h.windows, tt.h.t0, ttl); !reflect.DeepEqual(vs, ref) {
				t.Errorf("CheckTokens and the reference disagree:\n%s", firstDifference(vs, ref))
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.rule)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				for _, v := range vs {
					t.Log(v)
				}
				t.Fatalf("broken rules %q, want %q", got, tt.want)
			}
			for _, v := range vs {
				if s := v.String(); !strings.Contains(s, "Validate") || len(v.ops) < 1 {
					t.Errorf("violation does not show its operations:\n%s", s)
				}
			}
		})
	}
}

func TestViolationString(t *testing.T) {
	h := withSession(10).
		op(Op{Kind: RevokeAll, Manager: 1, User: 1, Keep: []int64{11}}, 10, 12, OK).
		op(validate(2, 10), 200, 201, OK)
	vs := CheckTokens(h.h, func(int) time.Duration { return 50 * time.Millisecond })
	if len(vs) != 1 {
		t.Fatalf("%d violations, want 1", len(vs))
	}
	s := vs[0].String()
	for _, want := range []string{ruleRevoked, "#0 m1 Issue session=10 user=1 [0s, 1ms] ok",
		"#1 m1 RevokeAll user=1 keep=[11] [10ms, 12ms] ok", "#2 m2 Validate session=10 [200ms, 201ms] ok",
		"CacheTTL 50ms", "188ms later"} {
		if !strings.Contains(s, want) {
			t.Errorf("violation text lacks %q:\n%s", want, s)
		}
	}
}

// TestHistoryRecording records concurrent calls through Begin and End and
// checks them.
func TestHistoryRecording(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	errDown := errors.New("down")
	h := New(func(err error) Outcome {
		if errors.Is(err, errDown) {
			return Unavailable
		}
		return OtherError
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			sid := int64(100 + g)
			c := h.Begin(Op{Kind: Issue, Manager: g % 2, User: int64(g)})
			c.SetSession(sid)
			c.End(nil)
			for range 20 {
				c := h.Begin(Op{Kind: Validate, Manager: g % 2, Session: sid})
				c.SetUser(int64(g))
				c.End(nil)
			}
			c = h.Begin(Op{Kind: Revoke, Manager: g % 2, Session: sid})
			c.End(nil)
			c = h.Begin(Op{Kind: Validate, Manager: g % 2, Session: sid})
			c.End(fmt.Errorf("validate: %w", errDown))
		})
	}
	h.ReadsMustWork(true)
	h.ReadsMustWork(true) // already open: no second span
	wg.Wait()
	h.Begin(Op{Kind: Revoke, Manager: 0, Session: 100}) // never ends
	h.ReadsMustWork(false)

	if n := h.Len(); n != 8*23+1 {
		t.Errorf("Len %d, want %d", n, 8*23+1)
	}
	if n := h.Sessions(); n != 8 {
		t.Errorf("Sessions %d, want 8", n)
	}
	if vs := CheckTokens(h, nil); len(vs) != 0 {
		t.Errorf("violations in a correct history: %v", vs)
	}
	var pending, unavailable int
	for _, op := range h.Ops() {
		switch op.Outcome {
		case Pending:
			pending++
		case Unavailable:
			unavailable++
			if !strings.Contains(op.Err, "down") {
				t.Errorf("error text not kept: %q", op.Err)
			}
		}
		if op.Outcome != Pending && op.End.Before(op.Start) {
			t.Errorf("op %d ends before it starts", op.Index)
		}
	}
	if pending != 1 || unavailable != 8 {
		t.Errorf("%d pending, %d unavailable; want 1, 8", pending, unavailable)
	}

	// A validate that succeeds after the revokes returned is caught.
	c := h.Begin(Op{Kind: Validate, Manager: 1, Session: 101})
	c.End(nil)
	if vs := CheckTokens(h, nil); len(vs) != 1 || vs[0].rule != ruleRevoked {
		t.Errorf("violations %v; want one %s", vs, ruleRevoked)
	}

	path := filepath.Join(t.TempDir(), "history.txt")
	if err := h.Dump(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != h.Len()+1 {
		t.Errorf("dump has %d lines, want %d ops and 1 span", lines, h.Len())
	}
	if !strings.Contains(string(b), "pending") || !strings.Contains(string(b), "reads must work") {
		t.Errorf("dump lacks the pending op or the span:\n%s", b)
	}
}
