package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/tokens"
)

// Accounts: sign-up, its verification by a link sent to the address,
// login, and password change.
//
// A sign-up makes no account. It keeps the sign-up (email, name, password
// hash) in Redis for verifyTTL under a digest of a random token, and
// mails the address a link with the token. Following the link and typing
// the sign-up's password again makes the account and logs in. So:
//
//   - only the owner of an address can make an account under it: nobody
//     can squat an address, and its owner can always sign up;
//   - a login to an address without an account, verified or not, is
//     answered like a wrong password, after the same work, so a login
//     tells nothing about who has signed up;
//   - a sign-up answers the same whether the address has an account or
//     not, after the same work (a strength check, a hash, one mail): the
//     owner of a taken address gets a notice instead of a link;
//   - the password asked for at verification keeps an owner who follows
//     a link from somebody else's sign-up of their address (they did get
//     the mail) from making an account with that somebody's password.

// verifyTTL is how long a sign-up waits for its link to be followed.
const verifyTTL = 24 * time.Hour

// credentials is the body of signup and login.
type credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	// Name is the public name of a new account (signup only).
	Name string `json:"name"`
	// Device names the device in the session list (login only).
	Device string `json:"device"`
	// Cookie asks for the token in an HttpOnly cookie instead of the
	// answer's body (login only): what the web page does.
	Cookie bool `json:"cookie"`
}

// check validates the fields and normalizes the email to lower case and
// the name to its trimmed form.
func (c *credentials) check(signup bool) *apiError {
	switch {
	case signup && c.Device != "":
		return badRequest("unknown field \"device\"")
	case signup && c.Cookie:
		return badRequest("unknown field \"cookie\"")
	case !signup && c.Name != "":
		return badRequest("unknown field \"name\"")
	}
	email, e := checkEmail(c.Email)
	if e != nil {
		return e
	}
	c.Email = email
	if e := checkPasswordField("password", c.Password); e != nil {
		return e
	}
	if e := checkDevice(c.Device); e != nil {
		return e
	}
	if signup {
		c.Name = strings.TrimSpace(c.Name)
		switch {
		case c.Name == "":
			return badRequest("name is required: the name other users see on your posts")
		case utf8.RuneCountInString(c.Name) > maxName:
			return badRequest("name is longer than %d characters", maxName)
		case strings.ContainsFunc(c.Name, unicode.IsControl):
			return badRequest("name holds a control character")
		}
	}
	return nil
}

// normalEmail is s as an email is stored, looked up and counted: trimmed
// and in lower case.
func normalEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// checkEmail returns the address trimmed and in lower case, or why it is
// not one.
func checkEmail(s string) (string, *apiError) {
	email := normalEmail(s)
	switch {
	case email == "":
		return "", badRequest("email is required")
	case len(email) > maxEmail:
		return "", badRequest("email is longer than %d bytes", maxEmail)
	}
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email || addr.Name != "" {
		return "", badRequest("email %q is not an address like name@example.com", email)
	}
	return email, nil
}

// checkPasswordField checks the length and characters of a password
// field named field.
func checkPasswordField(field, pw string) *apiError {
	switch n := utf8.RuneCountInString(pw); {
	case pw == "":
		return badRequest("%s is required", field)
	case n < minPassword:
		return badRequest("%s is shorter than %d characters", field, minPassword)
	case n > maxPassword:
		return badRequest("%s is longer than %d characters", field, maxPassword)
	case strings.ContainsRune(pw, 0):
		return badRequest("%s holds a NUL character", field)
	}
	return nil
}

func checkDevice(d string) *apiError {
	if utf8.RuneCountInString(d) > maxDevice || strings.ContainsRune(d, 0) {
		return badRequest("device is longer than %d characters or holds a NUL character", maxDevice)
	}
	return nil
}

// checkPublicURL checks Config.PublicURL and returns it ending in '/'.
func checkPublicURL(s string) (string, error) {
	if s == "" {
		return "http://localhost:8080/", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%w: PublicURL %q: want http(s)://host[:port][/path], no query or fragment", ErrConfig, s)
	}
	if !strings.HasSuffix(s, "/") {
		s += "/"
	}
	return s, nil
}

// throttled counts the request against rule and returns the 429 to
// answer when the limit is reached, or a 503 when Redis cannot count it:
// the limits fail closed, like the sessions.
func (a *App) throttled(r *http.Request, rl rule, key string) *apiError {
	e, err := a.limits.allow(r.Context(), rl, key)
	if err != nil {
		a.log.ErrorContext(r.Context(), "rate limit", "error", err)
		return &apiError{status: http.StatusServiceUnavailable, msg: "rate limiter unavailable", retryAfter: 1}
	}
	return e
}

// loginThrottled counts a password check for the account of email (a
// login, a password change's check of the current password, or a
// sign-up's verification) against the limits of the device that sends
// it, if that is a device the owner has logged in from with the password
// of credential epoch epoch, or else of the account: see ThrottleOptions.
// known says whether the account exists (a sign-up being verified has
// none yet, an unknown email neither); the device it returns is the
// known device's number, or "".
func (a *App) loginThrottled(r *http.Request, email string, known bool, epoch int64) (string, *apiError) {
	if known {
		device, err := a.devices.recognize(r.Context(), r, email, epoch)
		switch {
		case err == nil:
			return device, a.throttled(r, loginDevice, device)
		case !errors.Is(err, errNoDevice):
			// Redis cannot say; the account's limits, in the same
			// Redis, fail closed if it is down.
			a.log.WarnContext(r.Context(), "device cookie", "error", err)
		}
	}
	account := accountKey(email)
	if e := a.throttled(r, loginAccountIP, account+":"+addressKey(clientIP(r))); e != nil {
		return "", e
	}
	return "", a.throttled(r, loginAccount, account)
}

// sessionPasswordThrottled counts a logged-in user's check of their own
// password (a password change's current password, a reauthentication)
// as a login's: against the address's limit, then the device's or the
// account's (loginThrottled), so that a stolen session is worth no more
// guesses than the login form. The device it returns is the known
// device's number, or "".
func (a *App) sessionPasswordThrottled(r *http.Request, u User) (string, *apiError) {
	if e := a.throttled(r, loginIP, addressKey(clientIP(r))); e != nil {
		return "", e
	}
	return a.loginThrottled(r, u.Email, true, u.CredentialEpoch)
}

// signupAccepted is the answer to every signup that passed the checks,
// whether the email was new or already registered: the same status and
// body, after the same work, so that signup tells no one which emails
// have accounts.
var signupAccepted = struct {
	Message string `json:"message"`
}{"Check your mailbox: the link in it finishes the sign-up."}

// pendingSignup is a sign-up waiting for its link to be followed.
type pendingSignup struct {
	Email string `json:"email"`
	Name  string `json:"name"`
	Hash  string `json:"hash"`
}

// signupKey is the Redis key of the sign-up a link's token stands for:
// a digest, so that Redis holds no usable link.
func (a *App) signupKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return a.keyPrefix + "signup:" + hex.EncodeToString(sum[:])
}

// verifyTokenLen is the length of a link's token: 32 random bytes in
// base64url.
const verifyTokenLen = 43

// signup: POST /api/signup {email, password, name} -> 202, the same
// answer whether or not the email was already registered; a mail to the
// address says which.
func (a *App) signup(w http.ResponseWriter, r *http.Request) *apiError {
	var in credentials
	if e := a.decodeJSON(w, r, &in); e != nil {
		return e
	}
	// A sign-up the hash pool would refuse for want of room in the new
	// passwords' queue is refused now, before its rate limits spend
	// anything of Redis on it (see login).
	if a.hashes.full(classNewPassword) {
		a.hashes.rejected.Add(1)
		return a.internal(r.Context(), "signup", errHashBusy)
	}
	if e := a.throttled(r, signupIP, addressKey(clientIP(r))); e != nil {
		return e
	}
	if e := in.check(true); e != nil {
		return e
	}
	if e := a.throttled(r, signupAccount, accountKey(in.Email)); e != nil {
		return e
	}
	hash, e := a.newPasswordHash(r.Context(), in.Password, in.Email, in.Name)
	if e != nil {
		return e
	}
	var taken int64
	if err := a.db.WithContext(r.Context()).Model(&User{}).Where("email = ?", in.Email).Count(&taken).Error; err != nil {
		return a.internal(r.Context(), "signup: find user", err)
	}
	var msg Message
	if taken > 0 {
		a.log.InfoContext(r.Context(), "signup: the email is already registered; its owner is told, the client is not")
		msg = takenMessage(in.Email, a.publicURL)
	} else {
		token := base64.RawURLEncoding.EncodeToString(randomBytes(32))
		rec, _ := json.Marshal(pendingSignup{Email: in.Email, Name: in.Name, Hash: hash})
		if err := a.rdb.Set(r.Context(), a.signupKey(token), rec, verifyTTL).Err(); err != nil {
			return a.internal(r.Context(), "signup: keep the sign-up", err)
		}
		msg = verifyMessage(in.Email, a.publicURL+"#verify="+token)
	}
	if err := a.mailer.Send(r.Context(), msg); err != nil {
		a.log.ErrorContext(r.Context(), "signup: send mail", "error", err)
		return &apiError{status: http.StatusServiceUnavailable, msg: "cannot send mail now; try again later", retryAfter: 60}
	}
	writeJSON(w, http.StatusAccepted, signupAccepted)
	return nil
}

// newPasswordHash judges a new password's strength and hashes it, both
// in one job of the hash pool, whose slots and queue bound the work.
func (a *App) newPasswordHash(ctx context.Context, password, email, name string) (string, *apiError) {
	var hash string
	var refused *apiError
	err := a.hashes.do(ctx, classNewPassword, func() (err error) {
		if refused = checkPasswordPolicy(password, email, name); refused != nil {
			return nil
		}
		hash, err = hashPassword(password, a.argon)
		return err
	})
	if err != nil {
		return "", a.internal(ctx, "hash a new password", err)
	}
	if refused != nil {
		return "", refused
	}
	return hash, nil
}

// passwordMatches checks password against hash in the hash pool: in the
// known devices' class if device names one (see loginThrottled).
func (a *App) passwordMatches(ctx context.Context, password, hash, device string) (bool, *apiError) {
	class := classLogin
	if device != "" {
		class = classKnownDevice
	}
	var ok bool
	err := a.hashes.do(ctx, class, func() (err error) {
		ok, err = checkPassword(password, hash)
		return err
	})
	if err != nil {
		return false, a.internal(ctx, "check password", err)
	}
	return ok, nil
}

// randomBytes returns n bytes from crypto/rand.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails; it crashes the program instead
	return b
}

// verifyInput is the body of POST /api/verify.
type verifyInput struct {
	Token    string `json:"token"`
	Password string `json:"password"`
	Device   string `json:"device"`
	Cookie   bool   `json:"cookie"`
}

// verify: POST /api/verify {token, password[, device, cookie]} -> 200 and
// a session, as login answers: the link's sign-up, confirmed by its
// password, becomes an account, logged in. The password check counts
// against the login limits of the sign-up's email.
func (a *App) verify(w http.ResponseWriter, r *http.Request) *apiError {
	var in verifyInput
	if e := a.decodeJSON(w, r, &in); e != nil {
		return e
	}
	if e := a.throttled(r, loginIP, addressKey(clientIP(r))); e != nil {
		return e
	}
	if len(in.Token) != verifyTokenLen || strings.Trim(in.Token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return badRequest("token is not one of the server's links")
	}
	if e := checkPasswordField("password", in.Password); e != nil {
		return e
	}
	if e := checkDevice(in.Device); e != nil {
		return e
	}
	key := a.signupKey(in.Token)
	raw, err := a.rdb.Get(r.Context(), key).Bytes()
	if errors.Is(err, redis.Nil) {
		return &apiError{status: http.StatusGone, msg: "this link has expired or has been used: sign up again, or log in"}
	}
	if err != nil {
		return a.internal(r.Context(), "verify: find the sign-up", err)
	}
	var p pendingSignup
	if err := json.Unmarshal(raw, &p); err != nil {
		return a.internal(r.Context(), "verify: read the sign-up", err)
	}
	// No account yet, so no device of it.
	if _, e := a.loginThrottled(r, p.Email, false, 0); e != nil {
		return e
	}
	ok, e := a.passwordMatches(r.Context(), in.Password, p.Hash, "")
	if e != nil {
		return e
	}
	if !ok {
		return &apiError{status: http.StatusUnauthorized, msg: "this is not the password of the sign-up the link was sent for"}
	}
	u := User{Email: p.Email, Name: p.Name, PasswordHash: p.Hash}
	switch err := a.create(r.Context(), &u); {
	case errors.Is(err, gorm.ErrDuplicatedKey):
		_ = a.rdb.Del(r.Context(), key).Err()
		return &apiError{status: http.StatusConflict, msg: "this address has an account already: log in"}
	case err != nil:
		return a.internal(r.Context(), "verify: create user", err)
	}
	if err := a.rdb.Del(r.Context(), key).Err(); err != nil {
		// The link would make nothing more: the address is taken now.
		a.log.WarnContext(r.Context(), "verify: the used sign-up stays until it expires", "error", err)
	}
	return a.startSession(w, r, u, "", in.Device, in.Cookie)
}

// login: POST /api/login {email, password[, device, cookie]} -> 200
// {"token": "…", "session": {…}}, or with cookie, {"session": {…}} and
// the token in a cookie. A wrong email, an address whose sign-up was
// never verified and a wrong password get the same 401 after the same
// work.
func (a *App) login(w http.ResponseWriter, r *http.Request) *apiError {
	var in credentials
	if e := a.decodeJSON(w, r, &in); e != nil {
		return e
	}
	// Only a login that brings a device cookie the server signed for this
	// account can be from a known device; any other is checked in the
	// class of other logins (see hashPool). When that class's queue is
	// full, as it is under a flood from many addresses, such a login is
	// answered now, before any rate limit and the database spend anything
	// on it: the flood's refused requests take as little of Redis and the
	// database from the owners' logins as they can. It also meets the
	// account's limits before the database is read.
	signed := a.devices.signed(r, normalEmail(in.Email))
	if !signed && a.hashes.full(classLogin) {
		a.hashes.rejected.Add(1)
		return a.internal(r.Context(), "login", errHashBusy)
	}
	if e := a.throttled(r, loginIP, addressKey(clientIP(r))); e != nil {
		return e
	}
	if e := in.check(false); e != nil {
		return e
	}
	if !signed {
		if _, e := a.loginThrottled(r, in.Email, false, 0); e != nil {
			return e
		}
	}
	var u User
	err := a.db.WithContext(r.Context()).Where("email = ?", in.Email).Take(&u).Error
	hash := u.PasswordHash
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		hash = a.dummyHash
	case err != nil:
		return a.internal(r.Context(), "login: find user", err)
	}
	var device string
	if signed {
		var e *apiError
		if device, e = a.loginThrottled(r, in.Email, u.ID != 0, u.CredentialEpoch); e != nil {
			return e
		}
	}
	ok, e := a.passwordMatches(r.Context(), in.Password, hash, device)
	if e != nil {
		return e
	}
	if !ok || u.ID == 0 {
		return &apiError{status: http.StatusUnauthorized, msg: "wrong email or password"}
	}
	return a.startSession(w, r, u, device, in.Device, in.Cookie)
}

// loginAnswer is the answer to a login: the token, unless it went into a
// cookie, and the session.
type loginAnswer struct {
	Token   string         `json:"token,omitempty"`
	Session tokens.Session `json:"session"`
}

// startSession logs in u, whose password (as of u's credential epoch)
// the request has just matched: a session whose token goes into the
// answer's body (apps) or into an HttpOnly cookie (the web page, with
// cookie), and a device cookie that tells this device's later logins
// apart from strangers'; known is the number of the valid device cookie
// the login brought, if any, which the device keeps.
//
// No session of a check against a password that a change has replaced
// outlives the change. A change (changePassword) commits the new hash
// with the next credential epoch, then revokes every other session of
// the user. startSession issues the session, then reads the epoch again,
// and hands the token out only if it has not moved; else it ends the
// session and answers 401. Either the change committed before that read,
// and the login is refused; or after it, and so after the session was
// issued: the revocation, called after the commit, ends it (tokens:
// every session issued before RevokeAll is called is invalid when it
// returns). The device cookie names the epoch the password was checked
// against, so one earned by a login the change overtook is stale at
// once.
func (a *App) startSession(w http.ResponseWriter, r *http.Request, u User, known, device string, cookie bool) *apiError {
	ctx := r.Context()
	a.loginStep("checked")
	if a.floor != nil {
		if err := a.floor.cover(ctx); err != nil {
			return a.internal(ctx, "login: session floor", err)
		}
	}
	meta := tokens.Metadata{Device: device, UserAgent: r.UserAgent(), IP: clientIP(r)}
	// The cookies go into staged until the session is known to have
	// outlived any password change.
	staged := headerWriter{http.Header{}}
	var out loginAnswer
	var err error
	if cookie {
		out.Session, err = a.cookies.Issue(staged, r, u.ID, meta)
	} else {
		out.Token, out.Session, err = a.tokens.Issue(ctx, u.ID, meta)
	}
	if errors.Is(err, tokens.ErrCrossOrigin) {
		return &apiError{status: http.StatusForbidden, msg: "log in from this server's own page"}
	}
	if err != nil {
		return a.internal(ctx, "login: issue token", err)
	}
	if a.floor != nil {
		a.floor.issued(a.layout.Decode(out.Session.ID).Time)
	}
	a.loginStep("issued")
	if e := a.credentialsUnchanged(ctx, u, out.Session); e != nil {
		return e
	}
	if _, err := a.devices.issue(ctx, staged.h, u.Email, u.CredentialEpoch, known); err != nil {
		// The login stands; this device is a new one next time.
		a.log.WarnContext(ctx, "login: device cookie", "error", err)
	}
	for k, v := range staged.h {
		w.Header()[k] = append(w.Header()[k], v...)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// loginStep calls the tests' hook, if any (see defences.loginStep).
func (a *App) loginStep(step string) {
	if a.defences.loginStep != nil {
		a.defences.loginStep(step)
	}
}

// credentialsUnchanged reads u's credential epoch again after session s
// was issued for a password check against u's, and ends s with a 401 if
// a password change has moved it since (see startSession).
func (a *App) credentialsUnchanged(ctx context.Context, u User, s tokens.Session) *apiError {
	if a.defences.inFlightLoginSurvives {
		return nil
	}
	var now User
	err := a.db.WithContext(ctx).Select("credential_epoch").Take(&now, "id = ?", u.ID).Error
	if err == nil && now.CredentialEpoch == u.CredentialEpoch {
		return nil
	}
	// Nobody holds the session's token: ending it is tidying up, and a
	// session that could not be ended idles out.
	if _, rerr := a.tokens.RevokeSession(context.WithoutCancel(ctx), u.ID, s.ID); rerr != nil {
		a.log.WarnContext(ctx, "login: end the session of a replaced password", "error", rerr)
	}
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return a.internal(ctx, "login: read the credential epoch", err)
	}
	return &apiError{status: http.StatusUnauthorized, msg: "wrong email or password"}
}

// headerWriter is a ResponseWriter that keeps the headers set on it and
// nothing else: where a login's cookies wait until it may hand them out.
type headerWriter struct{ h http.Header }

func (hw headerWriter) Header() http.Header         { return hw.h }
func (hw headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (hw headerWriter) WriteHeader(int)             {}

// passwordInput is the body of POST /api/password.
type passwordInput struct {
	Current string `json:"current_password"`
	New     string `json:"new_password"`
}

// changePassword: POST /api/password {current_password, new_password} ->
// {"revoked": n}: the new password holds from now on, and every other
// session of the user ends (ASVS 4.0.3 V3.3.3), this one staying, with
// every device cookie and every login in flight that checked the old
// password (see startSession). The check of the current password counts
// against the login limits, as a login's does: of the device, if it is
// one the owner has logged in from, else of the account from this
// address and from all addresses, so that a stolen session is worth no
// more guesses than a login form. 409 means another change came first.
func (a *App) changePassword(w http.ResponseWriter, r *http.Request, s tokens.Session) *apiError {
	u, device, e := a.replacePassword(w, r, s)
	if e != nil {
		return e
	}
	// The password changed whatever happens here; a failure says so, and
	// the client retries the logout of the other sessions.
	ctx := r.Context()
	n, err := a.tokens.RevokeAll(ctx, s.UserID, s.ID)
	if err != nil {
		a.log.ErrorContext(ctx, "password: end the other sessions", "error", err)
		return &apiError{status: http.StatusServiceUnavailable, retryAfter: 1,
			msg: "the password is changed, but the other sessions could not be ended yet: log out everywhere"}
	}
	return a.passwordReplaced(w, r, u, device, n)
}

// replacePassword is changePassword's first step: it checks the
// request's current password and stores its new one, with the next
// credential epoch. It returns the user as they were before the change
// and the number of the device, if the request brought a known one's
// cookie.
func (a *App) replacePassword(w http.ResponseWriter, r *http.Request, s tokens.Session) (User, string, *apiError) {
	var in passwordInput
	if e := a.decodeJSON(w, r, &in); e != nil {
		return User{}, "", e
	}
	if e := checkPasswordField("current_password", in.Current); e != nil {
		return User{}, "", e
	}
	if e := checkPasswordField("new_password", in.New); e != nil {
		return User{}, "", e
	}
	ctx := r.Context()
	u, e := a.sessionUser(ctx, "password", s)
	if e != nil {
		return User{}, "", e
	}
	device, e := a.sessionPasswordThrottled(r, u)
	if e != nil {
		return User{}, "", e
	}
	ok, e := a.passwordMatches(ctx, in.Current, u.PasswordHash, device)
	if e != nil {
		return User{}, "", e
	}
	if !ok {
		return User{}, "", &apiError{status: http.StatusForbidden, msg: "current_password is wrong"}
	}
	hash, e := a.newPasswordHash(ctx, in.New, u.Email, u.Name)
	if e != nil {
		return User{}, "", e
	}
	// The epoch moves with the hash, in one statement, and only from the
	// one whose password was checked.
	res := a.db.WithContext(ctx).Model(&User{}).Where("id = ? AND credential_epoch = ?", u.ID, u.CredentialEpoch).
		Updates(map[string]any{"password_hash": hash, "credential_epoch": gorm.Expr("credential_epoch + 1")})
	if res.Error != nil {
		return User{}, "", a.internal(ctx, "password: save", res.Error)
	}
	if res.RowsAffected == 0 {
		return User{}, "", &apiError{status: http.StatusConflict, msg: "the password was changed meanwhile, from another session: log in again"}
	}
	return u, device, nil
}

// passwordReplaced answers a password change that ended n other sessions
// of u (as it was before the change): the request's device stays a
// known one, in the new epoch.
func (a *App) passwordReplaced(w http.ResponseWriter, r *http.Request, u User, device string, n int) *apiError {
	ctx := r.Context()
	if _, err := a.devices.issue(ctx, w.Header(), u.Email, u.CredentialEpoch+1, device); err != nil {
		a.log.WarnContext(ctx, "password: device cookie", "error", err)
	}
	writeJSON(w, http.StatusOK, struct {
		Revoked int `json:"revoked"`
	}{n})
	return nil
}
