package main

import (
	"errors"
	"net/http"
	"strings"

	"github.com/snowkeyhq/snowkey/tokens"
)

// reauthInput is the body of POST /api/reauth.
type reauthInput struct {
	Password string `json:"password"`
}

// reauthenticate: POST /api/reauth {password} -> {"session": {…}}, and
// for a client that sent its token in Authorization, {"token": "…"} too:
// the user confirms the password before something sensitive, and the
// session gets a new token (OWASP ASVS 4.0.3 V3.2.1), into the page's
// cookie or the answer. The requests the page sent with the old cookie
// before this answer came back, and a second click, are served by the
// rotation's grace window (tokens.Options.RotationGrace): the page stays
// logged in with one session. The check of the password counts as a
// login's does (sessionPasswordThrottled), and a known device's takes
// the known devices' hash slot.
func (a *App) reauthenticate(w http.ResponseWriter, r *http.Request, s tokens.Session) *apiError {
	var in reauthInput
	if e := a.decodeJSON(w, r, &in); e != nil {
		return e
	}
	if e := checkPasswordField("password", in.Password); e != nil {
		return e
	}
	u, e := a.sessionUser(r.Context(), "reauth", s)
	if e != nil {
		return e
	}
	device, e := a.sessionPasswordThrottled(r, u)
	if e != nil {
		return e
	}
	ok, e := a.passwordMatches(r.Context(), in.Password, u.PasswordHash, device)
	if e != nil {
		return e
	}
	if !ok {
		return &apiError{status: http.StatusForbidden, msg: "password is wrong"}
	}
	var out loginAnswer
	var err error
	if tok, ok := bearerToken(r); ok {
		out.Token, out.Session, err = a.tokens.Rotate(r.Context(), tok)
	} else {
		out.Session, err = a.cookies.Rotate(w, r)
	}
	switch {
	case errors.Is(err, tokens.ErrCrossOrigin):
		return &apiError{status: http.StatusForbidden, msg: "confirm the password from this server's own page"}
	case errors.Is(err, tokens.ErrInvalidToken):
		return &apiError{status: http.StatusUnauthorized, msg: "the session has ended: log in again"}
	case err != nil:
		return a.internal(r.Context(), "reauth: rotate", err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// bearerToken returns the token of the request's Authorization header,
// which the middleware read before the cookie, if it has one.
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}
