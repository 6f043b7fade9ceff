package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/tokens"
)

// Limits of what the API accepts.
const (
	maxEmail       = 254 // RFC 5321's limit on a path
	minPassword    = 8
	maxPassword    = 1024
	maxTitle       = 200 // characters
	maxPostBody    = 10000
	maxDevice      = 100
	maxName        = 50
	defaultPerPage = 20
	maxPerPage     = 100
)

// routes builds the handler of every public endpoint, which Open serves
// behind nosniff. Everything under /api/ except signup, verify, login and
// layout needs a token, from the Authorization header or the page's
// cookie, checked by the tokens Middleware, whose 401, 400, 403 and 503
// answers (RFC 6750) pass through unchanged.
func (a *App) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h func(http.ResponseWriter, *http.Request) *apiError) {
		mux.Handle(pattern, apiHandler(h))
	}
	authed := func(pattern string, h func(http.ResponseWriter, *http.Request, tokens.Session) *apiError) {
		mux.Handle(pattern, a.auth(apiHandler(func(w http.ResponseWriter, r *http.Request) *apiError {
			s, ok := tokens.FromContext(r.Context())
			if !ok { // cannot happen behind the Middleware
				return &apiError{status: http.StatusUnauthorized, msg: "not logged in"}
			}
			return h(w, r, s)
		})))
	}
	handle("POST /api/signup", a.signup)
	handle("POST /api/verify", a.verify)
	handle("POST /api/login", a.login)
	handle("GET /api/layout", a.layoutInfo)
	authed("GET /api/me", a.me)
	authed("POST /api/posts", a.createPost)
	authed("GET /api/posts", a.listPosts)
	authed("GET /api/posts/{id}", a.getPost)
	authed("GET /api/sessions", a.listSessions)
	authed("DELETE /api/sessions/{id}", a.deleteSession)
	authed("POST /api/logout", a.logout)
	authed("POST /api/logout-all", a.logoutAll)
	authed("POST /api/password", a.changePassword)
	authed("POST /api/reauth", a.reauthenticate)
	if a.outbox != nil {
		handle("GET /api/dev/outbox", a.devOutbox)
	}
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyzPublic)
	web := webHandler()
	mux.Handle("GET /{$}", web)
	mux.Handle("GET /app.js", web)
	mux.Handle("GET /snowkey.js", web)
	mux.Handle("GET /style.css", web)
	mux.Handle("GET /favicon.svg", web)
	return a.observe(jsonNotFound(mux))
}

// opsRoutes builds the handler of what operators read, for a listener of
// its own: the metrics, and readiness with its detail. Open serves it
// behind nosniff.
func (a *App) opsRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.handler())
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("GET /healthz", a.healthz)
	return mux
}

// nosniff sends X-Content-Type-Options: nosniff on every answer, before
// any handler (the tokens middleware's refusals, the mux's 404s and the
// page's files included) writes it: browsers then never read an answer
// as another type than its Content-Type says, such as a JSON answer
// that holds a user's text as a script or a style sheet.
func nosniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// apiHandler adapts a handler that returns its error answer.
type apiHandler func(http.ResponseWriter, *http.Request) *apiError

func (h apiHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e := h(w, r); e != nil {
		if e.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
		}
		writeError(w, e.status, e.msg)
	}
}

// internal logs err and returns a 500 that tells the client nothing more.
func (a *App) internal(ctx context.Context, op string, err error) *apiError {
	if errors.Is(err, errHashBusy) {
		return &apiError{status: http.StatusServiceUnavailable, msg: "the server is busy checking passwords; try again in 1 s", retryAfter: 1}
	}
	if errors.Is(err, tokens.ErrUnavailable) {
		a.log.ErrorContext(ctx, op, "error", err)
		return &apiError{status: http.StatusServiceUnavailable, msg: "session store unavailable"}
	}
	if errors.Is(err, idtype.ErrLeaseExpired) || errors.Is(err, idtype.ErrLeaseLost) {
		a.log.ErrorContext(ctx, op, "error", err)
		return &apiError{status: http.StatusServiceUnavailable, msg: "cannot issue IDs now: the worker lease is not confirmed"}
	}
	if ctx.Err() != nil {
		return &apiError{status: http.StatusServiceUnavailable, msg: "request canceled"}
	}
	a.log.ErrorContext(ctx, op, "error", err)
	return &apiError{status: http.StatusInternalServerError, msg: "internal error"}
}

// layoutInfo: GET /api/layout -> the bit layout of every ID, which the
// page's ID inspector draws.
func (a *App) layoutInfo(w http.ResponseWriter, _ *http.Request) *apiError {
	l := a.layout
	writeJSON(w, http.StatusOK, struct {
		Epoch        time.Time `json:"epoch"`
		EpochMS      int64     `json:"epoch_ms"`
		TimeBits     uint      `json:"time_bits"`
		WorkerBits   uint      `json:"worker_bits"`
		SequenceBits uint      `json:"sequence_bits"`
	}{l.Epoch.UTC(), l.Epoch.UnixMilli(), l.TimeBits(), l.WorkerBits, l.SequenceBits})
	return nil
}

// isLoopback reports whether ip is a loopback address.
func isLoopback(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Unmap().IsLoopback()
}

// clientIP is the peer's address. Behind a proxy it is the proxy's: the
// example trusts no X-Forwarded-For, which any client can forge.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// sessionUser reads the user of a session: 401 if the account is gone.
func (a *App) sessionUser(ctx context.Context, op string, s tokens.Session) (User, *apiError) {
	var u User
	err := a.db.WithContext(ctx).Take(&u, "id = ?", s.UserID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return u, &apiError{status: http.StatusUnauthorized, msg: "the session's user no longer exists"}
	}
	if err != nil {
		return u, a.internal(ctx, op+": find user", err)
	}
	return u, nil
}

// me: GET /api/me -> the user and the current session.
func (a *App) me(w http.ResponseWriter, r *http.Request, s tokens.Session) *apiError {
	u, e := a.sessionUser(r.Context(), "me", s)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, struct {
		userJSON
		Session tokens.Session `json:"session"`
	}{u.toJSON(a.layout), s})
	return nil
}

// postInput is the body of POST /api/posts.
type postInput struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

// createPost: POST /api/posts {title, body} -> 201 with the post.
func (a *App) createPost(w http.ResponseWriter, r *http.Request, s tokens.Session) *apiError {
	var in postInput
	if e := a.decodeJSON(w, r, &in); e != nil {
		return e
	}
	in.Title = strings.TrimSpace(in.Title)
	switch {
	case in.Title == "":
		return badRequest("title is required")
	case utf8.RuneCountInString(in.Title) > maxTitle:
		return badRequest("title is longer than %d characters", maxTitle)
	case utf8.RuneCountInString(in.Body) > maxPostBody:
		return badRequest("body is longer than %d characters", maxPostBody)
	case strings.ContainsRune(in.Title, 0) || strings.ContainsRune(in.Body, 0):
		return badRequest("title or body holds a NUL character")
	}
	p := Post{AuthorID: s.UserID, Title: in.Title, Body: in.Body}
	if err := a.create(r.Context(), &p); err != nil {
		return a.internal(r.Context(), "create post", err)
	}
	if err := a.db.WithContext(r.Context()).Take(&p.Author, "id = ?", p.AuthorID).Error; err != nil {
		return a.internal(r.Context(), "create post: find author", err)
	}
	writeJSON(w, http.StatusCreated, p.toJSON(a.layout))
	return nil
}

// listPosts: GET /api/posts[?before=<id>][&limit=<n>] -> the newest posts
// (older than before), newest first, and "next", the before of the next
// page, or null on the last page. Paging by key stays correct while posts
// are added, and costs one index range scan whatever the page.
func (a *App) listPosts(w http.ResponseWriter, r *http.Request, _ tokens.Session) *apiError {
	q := r.URL.Query()
	limit := defaultPerPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPerPage {
			return badRequest("limit %q is not a whole number from 1 to %d", v, maxPerPage)
		}
		limit = n
	}
	tx := a.db.WithContext(r.Context()).Preload("Author").Order("id DESC").Limit(limit + 1)
	if v := q.Get("before"); v != "" {
		before, err := idtype.Parse(v)
		if err != nil {
			return badRequest("before: %v", err)
		}
		tx = tx.Where("id < ?", before)
	}
	var posts []Post
	if err := tx.Find(&posts).Error; err != nil {
		return a.internal(r.Context(), "list posts", err)
	}
	out := struct {
		Posts []postJSON `json:"posts"`
		Next  *idtype.ID `json:"next"`
	}{Posts: make([]postJSON, 0, len(posts))}
	if len(posts) > limit {
		posts = posts[:limit]
		out.Next = &posts[limit-1].ID
	}
	for i := range posts {
		out.Posts = append(out.Posts, posts[i].toJSON(a.layout))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getPost: GET /api/posts/{id} -> the post, 404 if there is none.
func (a *App) getPost(w http.ResponseWriter, r *http.Request, _ tokens.Session) *apiError {
	id, e := pathID(r)
	if e != nil {
		return e
	}
	var p Post
	err := a.db.WithContext(r.Context()).Preload("Author").Take(&p, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return notFound("no post %s", id)
	}
	if err != nil {
		return a.internal(r.Context(), "get post", err)
	}
	writeJSON(w, http.StatusOK, p.toJSON(a.layout))
	return nil
}

// pathID reads the {id} of the path.
func pathID(r *http.Request) (idtype.ID, *apiError) {
	id, err := idtype.Parse(r.PathValue("id"))
	if err != nil {
		return 0, badRequest("id in the path: %v", err)
	}
	if id == 0 {
		return 0, badRequest("id in the path is 0, which no object has")
	}
	return id, nil
}

// sessionJSON is a session in the list, marked if it is the caller's own.
type sessionJSON struct {
	tokens.Session
	Current bool `json:"current"`
}

// listSessions: GET /api/sessions -> the user's live sessions, newest
// first.
func (a *App) listSessions(w http.ResponseWriter, r *http.Request, s tokens.Session) *apiError {
	list, err := a.tokens.List(r.Context(), s.UserID)
	if err != nil {
		return a.internal(r.Context(), "list sessions", err)
	}
	out := struct {
		Sessions []sessionJSON `json:"sessions"`
		Current  idtype.ID     `json:"current"`
	}{Sessions: make([]sessionJSON, 0, len(list)), Current: s.ID}
	for _, x := range list {
		out.Sessions = append(out.Sessions, sessionJSON{x, x.ID == s.ID})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteSession: DELETE /api/sessions/{id} -> 204, logging that device
// out; 404 if the user has no such live session.
func (a *App) deleteSession(w http.ResponseWriter, r *http.Request, s tokens.Session) *apiError {
	id, e := pathID(r)
	if e != nil {
		return e
	}
	ok, err := a.tokens.RevokeSession(r.Context(), s.UserID, id)
	if err != nil {
		return a.internal(r.Context(), "revoke session", err)
	}
	if !ok {
		return notFound("no live session %s", id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// logout: POST /api/logout -> 204, ending the current session and
// deleting the page's cookie, if there is one.
func (a *App) logout(w http.ResponseWriter, r *http.Request, s tokens.Session) *apiError {
	if _, err := a.tokens.RevokeSession(r.Context(), s.UserID, s.ID); err != nil {
		return a.internal(r.Context(), "logout", err)
	}
	a.cookies.Clear(w)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// logoutAll: POST /api/logout-all -> {"revoked": n}, ending every session
// of the user, this one too, and deleting the page's cookie.
func (a *App) logoutAll(w http.ResponseWriter, r *http.Request, s tokens.Session) *apiError {
	n, err := a.tokens.RevokeAll(r.Context(), s.UserID)
	if err != nil {
		return a.internal(r.Context(), "logout everywhere", err)
	}
	a.cookies.Clear(w)
	writeJSON(w, http.StatusOK, struct {
		Revoked int `json:"revoked"`
	}{n})
	return nil
}

// create inserts a new row. gormplugin fills its zero idtype.ID key from
// the generator, before GORM's own hooks run.
func (a *App) create(ctx context.Context, v any) error {
	return a.db.WithContext(ctx).Create(v).Error
}

// jsonNotFound turns the mux's own plain-text 404 and 405 answers under
// /api/ into JSON ones.
func jsonNotFound(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" && strings.HasPrefix(r.URL.Path, "/api/") {
			rec := &statusRecorder{ResponseWriter: discardWriter{h: w.Header()}}
			mux.ServeHTTP(rec, r)
			switch rec.status {
			case http.StatusMethodNotAllowed:
				writeError(w, rec.status, "method "+r.Method+" is not allowed on "+r.URL.Path)
			default:
				writeError(w, http.StatusNotFound, "no endpoint "+r.URL.Path)
			}
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// discardWriter keeps headers (such as Allow) and drops the body.
type discardWriter struct{ h http.Header }

func (d discardWriter) Header() http.Header         { return d.h }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

// statusRecorder remembers the status a handler sent.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// observe logs one line per request at Info (method, path, status and
// duration; never headers or bodies, which hold tokens and passwords) and
// counts it in the metrics by route pattern and status.
func (a *App) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		took := time.Since(start)
		// The ServeMux set r.Pattern, on this very request, to the
		// pattern it matched; "" if none.
		a.metrics.request(r.Pattern, rec.status, took)
		a.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Duration("duration", took))
	})
}
