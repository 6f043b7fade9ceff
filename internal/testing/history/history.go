package history

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// OpKind is what a recorded token operation did.
type OpKind int

// The token operations a History records.
const (
	// Issue made a session for Op.User; Op.Session is the new session.
	Issue OpKind = iota + 1
	// Validate checked a token of Op.Session; on success Op.User may hold
	// the user it returned.
	Validate
	// Revoke revoked the token of Op.Session.
	Revoke
	// RevokeSession revoked Op.Session of Op.User by its ID.
	RevokeSession
	// RevokeAll revoked every session of Op.User except those in Op.Keep.
	RevokeAll
	// Rotate replaced Op.Session by Op.NewSession.
	Rotate
)

// String returns the operation's name, such as "RevokeAll".
func (k OpKind) String() string {
	switch k {
	case Issue:
		return "Issue"
	case Validate:
		return "Validate"
	case Revoke:
		return "Revoke"
	case RevokeSession:
		return "RevokeSession"
	case RevokeAll:
		return "RevokeAll"
	case Rotate:
		return "Rotate"
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Outcome is how a recorded operation ended.
type Outcome int

// The outcomes of an operation.
const (
	// Pending: the operation began and has not ended (it hangs, or its
	// goroutine was abandoned). A pending operation constrains nothing.
	Pending Outcome = iota
	// OK: the operation succeeded; for Validate, the token was accepted.
	OK
	// Invalid: the token or session was refused as invalid (for Validate,
	// the token was not accepted).
	Invalid
	// Unavailable: the store could not be reached or did not answer.
	Unavailable
	// OtherError: any other error.
	OtherError
)

// String returns the outcome in lower case, such as "unavailable".
func (o Outcome) String() string {
	switch o {
	case Pending:
		return "pending"
	case OK:
		return "ok"
	case Invalid:
		return "invalid"
	case Unavailable:
		return "unavailable"
	case OtherError:
		return "error"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Op is one recorded token operation.
type Op struct {
	// Index is the operation's position in its History, in the order the
	// operations began.
	Index int
	Kind  OpKind
	// Manager names the tokens.Manager (or process) that ran it; managers
	// with their own caches must have different numbers.
	Manager int
	// Session is the session the operation acted on; for Issue, the
	// session it made (set with Call.SetSession once known).
	Session int64
	// User is the user of Issue, RevokeSession and RevokeAll; for
	// Validate and Rotate, the user the call returned, if recorded.
	User int64
	// Keep holds the sessions a RevokeAll kept.
	Keep []int64
	// NewSession is the session a Rotate made.
	NewSession int64
	// Served is, for a Validate that returned another session than
	// Session, the session it returned: a token that Rotate replaced
	// stands for its successor for a grace window (tokens'
	// Options.RotationGrace).
	Served int64
	// Start is read just before the call, End just after it returned;
	// both from time.Now in the one process that records the history, so
	// they compare by the monotonic clock.
	Start, End time.Time
	Outcome    Outcome
	// Err is the text of the error the call returned, if any.
	Err string
}

// History records token operations, with when each began and ended, for
// CheckTokens. It is safe for concurrent use: each goroutine records its
// own calls.
type History struct {
	classify func(error) Outcome

	mu      sync.Mutex
	t0      time.Time
	ops     []Op
	windows []window // when reads must work
}

// window is a span in which reads must work; to is zero while it is open.
type window struct{ from, to time.Time }

// NewHistory returns an empty History. classify maps the error of a
// failed call to its Outcome (Invalid, Unavailable or OtherError), for
// Call.End; nil makes every error OtherError. A tokens scenario would pass
//
//	func(err error) history.Outcome {
//		switch {
//		case errors.Is(err, tokens.ErrInvalidToken):
//			return history.Invalid
//		case errors.Is(err, tokens.ErrUnavailable):
//			return history.Unavailable
//		}
//		return history.OtherError
//	}
func New(classify func(error) Outcome) *History {
	return &History{classify: classify, t0: time.Now()}
}

// Call is one operation being recorded. It belongs to the goroutine that
// began it until End.
type Call struct {
	h *History
	i int
	// op holds what the caller set so far; copied into h at End.
	op Op
}

// Begin records that op began now and returns its Call, which the caller
// ends with End once the operation returns. op holds what is known before
// the call: Kind, Manager, and Session, User and Keep as the kind needs;
// Index, Start, End and Outcome are set here.
func (h *History) Begin(op Op) *Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Index = len(h.ops)
	op.Keep = append([]int64(nil), op.Keep...)
	op.Start, op.End, op.Outcome, op.Err = time.Now(), time.Time{}, Pending, ""
	h.ops = append(h.ops, op)
	return &Call{h: h, i: op.Index, op: op}
}

// SetSession records the session an Issue made.
func (c *Call) SetSession(id int64) { c.op.Session = id }

// SetUser records the user a Validate or Rotate returned.
func (c *Call) SetUser(id int64) { c.op.User = id }

// SetNewSession records the session a Rotate made.
func (c *Call) SetNewSession(id int64) { c.op.NewSession = id }

// SetServed records the session a Validate returned, when it is not the
// one the operation began with.
func (c *Call) SetServed(id int64) { c.op.Served = id }

// End records that the operation returned err now: OK when err is nil,
// else the Outcome the History's classify gives it.
func (c *Call) End(err error) {
	out := OK
	if err != nil {
		out = OtherError
		if c.h.classify != nil {
			out = c.h.classify(err)
		}
	}
	c.endAs(out, err)
}

// endAs records that the operation ended now with out (err, if not nil,
// is kept as text for reports).
func (c *Call) endAs(out Outcome, err error) {
	end := time.Now()
	c.op.End, c.op.Outcome = end, out
	if err != nil {
		c.op.Err = err.Error()
	}
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	c.h.ops[c.i] = c.op
}

// ReadsMustWork opens (on) or closes a span of time in which a Validate of
// a live session that nobody tried to revoke must not fail with
// Unavailable: a scenario opens it where its defence promises that reads
// go on (say, while Redis refuses writes for lack of memory) and leaves it
// closed where a failure to answer is allowed (while the store is down).
func (h *History) ReadsMustWork(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	open := len(h.windows) > 0 && h.windows[len(h.windows)-1].to.IsZero()
	switch {
	case on && !open:
		h.windows = append(h.windows, window{from: now})
	case !on && open:
		h.windows[len(h.windows)-1].to = now
	}
}

// Ops returns a copy of the operations recorded so far, in the order they
// began.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := make([]Op, len(h.ops))
	copy(ops, h.ops)
	return ops
}

// Len returns the number of operations recorded so far.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Sessions returns the number of sessions that Issue or Rotate made with
// success, the tokens a check covers.
func (h *History) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, op := range h.ops {
		if op.Outcome == OK && ((op.Kind == Issue && op.Session != 0) || (op.Kind == Rotate && op.NewSession != 0)) {
			n++
		}
	}
	return n
}

// Dump writes the history to the file at path, one operation a line with
// times relative to the history's start, for a failing test to keep.
func (h *History) Dump(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("history: dump history: %w", err)
	}
	w := bufio.NewWriter(f)
	h.mu.Lock()
	for _, op := range h.ops {
		fmt.Fprintln(w, op.format(h.t0))
	}
	for _, win := range h.windows {
		fmt.Fprintf(w, "reads must work [%v, %v]\n", win.from.Sub(h.t0), since(h.t0, win.to))
	}
	h.mu.Unlock()
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("history: dump history: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("history: dump history: %w", err)
	}
	return nil
}

// format prints op with its times relative to t0.
func (op Op) format(t0 time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d m%d %s", op.Index, op.Manager, op.Kind)
	if op.Session != 0 {
		fmt.Fprintf(&b, " session=%d", op.Session)
	}
	if op.User != 0 {
		fmt.Fprintf(&b, " user=%d", op.User)
	}
	if op.Kind == RevokeAll {
		fmt.Fprintf(&b, " keep=%v", op.Keep)
	}
	if op.NewSession != 0 {
		fmt.Fprintf(&b, " new=%d", op.NewSession)
	}
	if op.Served != 0 {
		fmt.Fprintf(&b, " served=%d", op.Served)
	}
	fmt.Fprintf(&b, " [%v, %v] %s", op.Start.Sub(t0), since(t0, op.End), op.Outcome)
	if op.Err != "" {
		fmt.Fprintf(&b, " (%s)", op.Err)
	}
	return b.String()
}

// since formats t relative to t0, or "…" for a time not reached.
func since(t0, t time.Time) string {
	if t.IsZero() {
		return "…"
	}
	return t.Sub(t0).String()
}
