package tokens

import "errors"

// Errors the Manager returns. Match them with errors.Is: the backend errors
// are wrapped with the operation and the cause. Bad Options wrap
// idtype.ErrInvalidOptions, the one sentinel of every snowkey constructor.
var (
	// ErrInvalidToken means the token cannot be used: it is malformed, has
	// a wrong checksum, secret or prefix, is unknown, has expired or was
	// revoked, or its entry in the index is gone from Redis (evicted or
	// lost, which ends every session of the user, or of every user of its
	// slot tag when the tag's index is evicted). It is one error on purpose:
	// a caller (and so a client) must not learn which, since that would
	// tell an attacker which guesses came close. The right answer to it is
	// "log in again".
	ErrInvalidToken = errors.New("tokens: invalid token")

	// ErrUnavailable means the session store could not answer: Redis is
	// unreachable or failed (out of memory, for a call that must write), a
	// Cluster slot the user's keys are in is migrating, fewer replicas than
	// Options.WaitReplicas acknowledged a revocation, or the context ended
	// first. Nothing is known about the token, and the caller must fail
	// closed (the Middleware answers 503). A revocation that returns it may
	// or may not have applied: retry it. The error wraps the cause, so
	// errors.Is also matches context.DeadlineExceeded and the like.
	ErrUnavailable = errors.New("tokens: session store unavailable")

	// ErrInvalidUser means a user ID that no session can belong to: zero
	// or negative.
	ErrInvalidUser = errors.New("tokens: invalid user ID")
)
