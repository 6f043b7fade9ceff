package tokens

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
)

// Middleware authenticates every request before next sees it. It reads the
// token from "Authorization: Bearer <token>" (RFC 6750), or from
// Options.Header if set, never from the query string, and answers:
//
//   - no token (no Authorization header, or another scheme such as Basic):
//     401 with WWW-Authenticate: Bearer realm="…" and no error code;
//   - a malformed header, a Bearer scheme without a token, or a token sent
//     in more than one header: 400 with error="invalid_request";
//   - a token that is malformed, unknown, expired or revoked: 401 with
//     error="invalid_token";
//   - Redis unreachable or failing: 503, with no detail in the response
//     (fail closed);
//   - a valid token: next, with the Session in the request's context (see
//     FromContext).
//
// It logs to Options.Logger: rejected tokens at Debug, store failures at
// Error, naming the session ID (public) and never the token.
func (m *Manager) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var custom []string
		if m.opts.Header != "" {
			custom = r.Header.Values(m.opts.Header)
		}
		tok, res := parseCredentials(r.Header.Values("Authorization"), custom)
		switch res {
		case credNone:
			m.challenge(w, http.StatusUnauthorized, "")
			return
		case credMalformed:
			m.opts.Logger.LogAttrs(r.Context(), slog.LevelDebug, "tokens: malformed credentials")
			m.challenge(w, http.StatusBadRequest, "invalid_request")
			return
		}
		s, err := m.Validate(r.Context(), tok)
		if err == nil {
			next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), s)))
			return
		}
		attrs := make([]slog.Attr, 0, 2)
		if sid, ok := sessionOf(m.opts.TokenPrefix, tok); ok {
			attrs = append(attrs, slog.Int64("session", int64(sid)))
		}
		switch {
		case errors.Is(err, ErrInvalidToken):
			m.opts.Logger.LogAttrs(r.Context(), slog.LevelDebug, "tokens: token rejected", attrs...)
			m.challenge(w, http.StatusUnauthorized, "invalid_token")
		case r.Context().Err() != nil:
			// The client is gone; nobody reads the answer.
			m.opts.Logger.LogAttrs(r.Context(), slog.LevelDebug, "tokens: request ended during validation", attrs...)
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		default:
			attrs = append(attrs, slog.String("error", err.Error()))
			m.opts.Logger.LogAttrs(r.Context(), slog.LevelError, "tokens: session store unavailable", attrs...)
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		}
	})
}

// challenge answers with a Bearer challenge and, unless code is empty, an
// RFC 6750 error code.
func (m *Manager) challenge(w http.ResponseWriter, status int, code string) {
	v := `Bearer realm="` + m.opts.Realm + `"`
	if code != "" {
		v += `, error="` + code + `"`
	}
	w.Header().Set("WWW-Authenticate", v)
	http.Error(w, http.StatusText(status), status)
}

// credResult is what a request offers as credentials.
type credResult int

const (
	credNone      credResult = iota // no token
	credToken                       // exactly one token, of valid syntax
	credMalformed                   // a malformed header, or more than one token
)

// parseCredentials finds the token in the values of the Authorization
// header and of the custom header (nil when none is configured). A token
// must be an RFC 6750 b64token; whether it is one of ours is Validate's
// business. It does not panic on any input.
func parseCredentials(auth, custom []string) (string, credResult) {
	var tok string
	found := 0
	switch len(auth) {
	case 0:
	case 1:
		scheme, rest, _ := strings.Cut(auth[0], " ")
		if !strings.EqualFold(scheme, "Bearer") {
			break // another scheme, or an empty header: no Bearer credentials
		}
		rest = strings.TrimLeft(rest, " ")
		if !isB64Token(rest) {
			return "", credMalformed
		}
		tok, found = rest, found+1
	default:
		return "", credMalformed
	}
	switch len(custom) {
	case 0:
	case 1:
		v := strings.Trim(custom[0], " \t")
		if v == "" {
			break
		}
		if !isB64Token(v) {
			return "", credMalformed
		}
		tok, found = v, found+1
	default:
		return "", credMalformed
	}
	switch found {
	case 0:
		return "", credNone
	case 1:
		return tok, credToken
	}
	return "", credMalformed // RFC 6750 §2: one method per request
}

// isB64Token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || strings.IndexByte("-._~+/", c) >= 0) {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

type sessionKey struct{}

// NewContext returns a copy of ctx that carries the session, as Middleware
// passes it to handlers. Tests of handlers can use it to fake a login.
func NewContext(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// FromContext returns the session that Middleware validated for the
// request whose context ctx is, and false if there is none.
func FromContext(ctx context.Context) (Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(Session)
	return s, ok
}
