package tokens

import "context"

// An Observer is told when each of a Manager's calls starts and ends, so
// that metrics and tracing can time them and record spans without
// wrapping the Manager: the middleware's Validate calls are observed too.
// Options.Observer sets it; nil, the default, observes nothing and costs
// one comparison per call. The module
// github.com/snowkeyhq/snowkey/extra/snowkeyotel implements one for
// OpenTelemetry; the interface needs no dependency of its own.
//
// Start is called as a call begins, with the caller's context; the
// context it returns is the one the call goes on with (so a span started
// there is the parent of what the Redis client records) and the one End
// receives. End is called once, as the call returns, with its error: nil
// on success, or an error that errors.Is matches against ErrInvalidToken,
// ErrUnavailable and the rest. Both run on the caller's goroutine, for
// many goroutines at once, and must not call the Manager.
type Observer interface {
	Start(ctx context.Context, op Op) context.Context
	End(ctx context.Context, op Op, err error)
}

// Op names a Manager call for an Observer.
type Op string

// The calls an Observer hears of, one Op per method.
const (
	OpIssue         Op = "issue"
	OpValidate      Op = "validate"
	OpRotate        Op = "rotate"
	OpRevoke        Op = "revoke"
	OpRevokeSession Op = "revoke_session"
	OpRevokeAll     Op = "revoke_all"
)
