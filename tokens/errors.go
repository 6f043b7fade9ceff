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

	// ErrCrossOrigin means that Cookies refused a request that a page on
	// another origin made the browser send with the cookie: a cross-site
	// request forgery, or a page of the app served from an origin missing
	// from CookieOptions.TrustedOrigins. The middleware refuses unsafe
	// requests (any method but GET, HEAD and OPTIONS) and answers 403;
	// Issue, Rotate and Revoke refuse every such request, whatever its
	// method (a link or a redirect too), and a handler that gets it from
	// them should answer 403 as well.
	ErrCrossOrigin = errors.New("tokens: cross-origin request refused")

	// ErrDuplicateCookie means that a request carried the session cookie
	// more than once: a page on a sibling subdomain (or, for a name
	// without the "__Host-" prefix, on plain HTTP) set a cookie of the
	// same name for another Domain or Path, which the browser sends
	// beside the real one ("cookie tossing"), so which one is the user's
	// cannot be told. Cookies ends the session of every copy and deletes
	// every copy the browser may hold, and the user must log in again:
	// the middleware answers 401, and Rotate and Revoke return an error
	// that wraps both ErrDuplicateCookie and ErrInvalidToken, so that
	// handlers that answer ErrInvalidToken need nothing more. Cookies.Issue
	// deletes the copies and logs in.
	ErrDuplicateCookie = errors.New("tokens: session cookie sent more than once")

	// ErrInvalidUser means a user ID that no session can belong to: zero
	// or negative.
	ErrInvalidUser = errors.New("tokens: invalid user ID")
)
