package tokens

import (
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Session is what a valid token stands for. It never holds the token or
// its secret, so it is safe to log, to cache and to show in a "signed-in
// devices" list; the JSON field names suit such an API, and IDs encode as
// strings (see idtype.ID).
type Session struct {
	// ID is the session's snowflake: the public handle of the session, in
	// a session list and in RevokeSession. It is part of the token but
	// does not authenticate anything by itself.
	ID idtype.ID `json:"id"`
	// UserID is the user the session belongs to.
	UserID idtype.ID `json:"user_id"`
	// LoginAt is when the user logged in: when the first token of the
	// session was issued, before any Rotate.
	LoginAt time.Time `json:"login_at"`
	// IssuedAt is when this session's token was issued (by Issue, or by
	// the Rotate that made it), read from the session ID.
	IssuedAt time.Time `json:"issued_at"`
	// LastSeenAt is when the session was last used, as of the last write:
	// Validate writes at most once per Options.RefreshInterval, so it may
	// be up to that much older than the real last use. It has a
	// resolution of 10 ms.
	LastSeenAt time.Time `json:"last_seen_at"`
	// ExpiresAt is when the session ends if it is not used again: the
	// earlier of LastSeenAt + Options.IdleTimeout and AbsoluteExpiresAt.
	ExpiresAt time.Time `json:"expires_at"`
	// AbsoluteExpiresAt is when the session ends however much it is used:
	// LoginAt + Options.AbsoluteLifetime. Rotate does not move it.
	AbsoluteExpiresAt time.Time `json:"absolute_expires_at"`

	Metadata
}

// Metadata is what Issue records about the client, for the user's list of
// sessions. It is stored as given, not checked: it comes from the client
// and is only as true as the client. Each field is cut to 255 bytes (at a
// UTF-8 boundary); the rest is dropped.
type Metadata struct {
	// Device is a name for the device, such as "Anna's iPhone".
	Device string `json:"device,omitempty"`
	// UserAgent is the client's User-Agent header.
	UserAgent string `json:"user_agent,omitempty"`
	// IP is the client's address as the server saw it at login.
	IP string `json:"ip,omitempty"`
}
