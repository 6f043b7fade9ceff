package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// Secrets of DATABASE_URL and REDIS_URL stay out of logs and errors in
// two ways:
//
//   - What the server says about its servers (the first log line, error
//     messages of its own) is built from the fields that the drivers' own
//     parsers (pgconn.ParseConfig, redis.ParseURL) read out of the URL:
//     user, host, port, database. A password, in whatever form the URL
//     holds it, is never among them.
//   - Every log line and every error Open and Close return pass through a
//     redactor that knows each secret of both URLs, in every form a
//     message could quote it: as the driver decoded it, and as written in
//     the URL (percent-encoded, quoted). That covers what the drivers and
//     libraries below say, which the server does not control.

// minSecretLen is the length below which a secret is not searched for in
// free text: a one- or two-character password would match everywhere and
// make every log line unreadable, and guessing it takes no log anyway.
const minSecretLen = 3

// redactor replaces the secrets of the server's URLs in text. A nil
// redactor replaces nothing.
type redactor struct {
	replace *strings.Replacer
}

// newRedactor returns a redactor of every secret in urls, or nil if they
// hold none.
func newRedactor(urls ...string) *redactor {
	var secrets []string
	for _, u := range urls {
		for _, s := range urlSecrets(u) {
			if len(s) >= minSecretLen && !slices.Contains(secrets, s) {
				secrets = append(secrets, s)
			}
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	// Longer first, so that a secret that contains another is replaced
	// whole.
	slices.SortFunc(secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, "xxxxx")
	}
	return &redactor{replace: strings.NewReplacer(pairs...)}
}

// scrub returns s with every secret replaced by xxxxx.
func (r *redactor) scrub(s string) string {
	if r == nil {
		return s
	}
	return r.replace.Replace(s)
}

// err returns err with its message scrubbed; errors.Is and errors.As see
// through to err.
func (r *redactor) err(err error) error {
	if r == nil || err == nil {
		return err
	}
	msg := err.Error()
	if clean := r.scrub(msg); clean != msg {
		return &redactedError{msg: clean, err: err}
	}
	return err
}

// redactedError is an error whose message had a secret in it.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// logger returns l with every line scrubbed.
func (r *redactor) logger(l *slog.Logger) *slog.Logger {
	if r == nil {
		return l
	}
	return slog.New(&redactHandler{next: l.Handler(), r: r})
}

// redactHandler scrubs the message and every attribute of a log record
// before its handler sees them.
type redactHandler struct {
	next slog.Handler
	r    *redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.scrub(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &redactHandler{next: h.next.WithAttrs(clean), r: h.r}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{next: h.next.WithGroup(name), r: h.r}
}

// attr scrubs one attribute: strings, groups, and any other value whose
// text (as a text or JSON handler would print it) holds a secret.
func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.scrub(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]slog.Attr, len(g))
		for i, x := range g {
			clean[i] = h.attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		s := fmt.Sprintf("%+v", v.Any())
		if clean := h.r.scrub(s); clean != s {
			return slog.String(a.Key, clean)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// urlSecrets returns every secret a DATABASE_URL or REDIS_URL holds, in
// each form text could quote it: decoded by the driver's parser, and as
// written (userinfo password, query parameters and key=value settings
// whose name says password, secret or token).
func urlSecrets(raw string) []string {
	var out []string
	add := func(s string) {
		if s != "" {
			out = append(out, s)
		}
	}
	switch {
	case isPostgresURL(raw):
		if c, err := pgconn.ParseConfig(raw); err == nil {
			add(c.Password)
		}
	case isRedisURL(raw):
		if o, err := redis.ParseURL(raw); err == nil {
			add(o.Password)
		}
	}
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		query := ""
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			rest, query = rest[:i], rest[i+1:]
		}
		// The userinfo ends at the last '@' before the query: a password
		// may hold an unescaped '/' or '@', which a URL parser would take
		// for the path or the host.
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			if _, pw, ok := strings.Cut(rest[:i], ":"); ok {
				addBothForms(add, pw, url.PathUnescape)
			}
		}
		query, _, _ = strings.Cut(query, "#")
		for kv := range strings.SplitSeq(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if name, err := url.QueryUnescape(k); err == nil && isSecretKey(name) || isSecretKey(k) {
				addBothForms(add, v, url.QueryUnescape)
			}
		}
	} else {
		for _, kv := range keywordValues(raw) {
			if isSecretKey(kv.key) {
				add(kv.raw)
				add(kv.value)
			}
		}
	}
	return out
}

// addBothForms adds s as written and as decoded.
func addBothForms(add func(string), s string, decode func(string) (string, error)) {
	add(s)
	if d, err := decode(s); err == nil {
		add(d)
	}
}

// isSecretKey reports whether a connection setting's name says it is a
// secret: password, sslpassword, and the like.
func isSecretKey(name string) bool {
	name = strings.ToLower(name)
	return strings.Contains(name, "pass") || strings.Contains(name, "secret") || strings.Contains(name, "token")
}

// setting is one key=value of a PostgreSQL connection string.
type setting struct {
	key   string
	raw   string // as written, inside the quotes if quoted
	value string // with quotes and backslash escapes undone
}

// keywordValues reads a libpq key=value connection string the way libpq
// does: values are bare words or single-quoted with backslash escapes.
// It only finds secrets to redact; pgconn.ParseConfig judges the string.
func keywordValues(s string) []setting {
	var out []setting
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
	}
	for {
		skip()
		start := i
		for i < len(s) && s[i] != '=' && s[i] != ' ' {
			i++
		}
		key := s[start:i]
		skip()
		if i >= len(s) || s[i] != '=' {
			return out
		}
		i++
		skip()
		var raw, value strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' && i+1 < len(s) {
					raw.WriteByte(s[i])
					i++
				}
				raw.WriteByte(s[i])
				value.WriteByte(s[i])
				i++
			}
			i++ // the closing quote
		} else {
			for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
				raw.WriteByte(s[i])
				value.WriteByte(s[i])
				i++
			}
		}
		out = append(out, setting{key: key, raw: raw.String(), value: value.String()})
	}
}

// isPostgresURL reports whether s names PostgreSQL: a postgres:// or
// postgresql:// URL, or a key=value connection string.
func isPostgresURL(s string) bool {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		return true
	}
	return !strings.Contains(s, "://") && !strings.HasPrefix(s, "sqlite:") && strings.Contains(s, "=")
}

// isRedisURL reports whether s has a scheme redis.ParseURL takes.
func isRedisURL(s string) bool {
	for _, p := range []string{"redis://", "rediss://", "unix://"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// parseErrorText is what a configuration error may say of a URL that a
// driver could not parse. net/url's errors quote the whole URL, and their
// detail quotes the part they stumbled on, which may be a piece of the
// password (an unescaped '/' in it ends the host early): when the URL
// holds a secret, the detail is withheld.
func parseErrorText(raw string, err error) string {
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		return err.Error()
	}
	if len(urlSecrets(raw)) > 0 {
		return "it is not a valid URL (the parser's message is withheld because it could quote the password; " +
			"characters such as '/', '@', '?', '#' and '%' in a password must be percent-encoded)"
	}
	return "it is not a valid URL: " + uerr.Err.Error()
}
