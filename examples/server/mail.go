package main

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mailer sends the server's emails: the link that verifies a sign-up, and
// the notice to the owner of an address that someone tried to sign up
// with again. Send returns once the mail is handed over (to the SMTP
// server, or to the outbox); an error means it was not, and the request
// that wanted it fails with 503, whichever mail it was, so that the
// answer says nothing about which one.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// Message is one plain-text email to one address.
type Message struct {
	To      string    `json:"to"`
	Subject string    `json:"subject"`
	Body    string    `json:"body"`
	SentAt  time.Time `json:"sent_at"`
}

// outbox is the Mailer of development (make run, with no SMTP_URL and a
// loopback listener): it keeps the last outboxSize mails in memory, and
// the page shows them (GET /api/dev/outbox), links and all. It must
// never serve a server that others can reach: anyone who reads it can
// verify any sign-up.
type outbox struct {
	mu   sync.Mutex
	mail []Message // oldest first
	// sent is closed and replaced on every Send, for tests that wait for
	// a mail.
	sent chan struct{}
}

// outboxSize bounds the mails the development outbox keeps.
const outboxSize = 50

func newOutbox() *outbox { return &outbox{sent: make(chan struct{})} }

func (o *outbox) Send(_ context.Context, m Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	m.SentAt = time.Now().UTC()
	o.mail = append(o.mail, m)
	if len(o.mail) > outboxSize {
		o.mail = slices.Delete(o.mail, 0, len(o.mail)-outboxSize)
	}
	close(o.sent)
	o.sent = make(chan struct{})
	return nil
}

// messages returns the mails, newest first, and a channel that is closed
// at the next Send.
func (o *outbox) messages() ([]Message, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := slices.Clone(o.mail)
	slices.Reverse(out)
	return out, o.sent
}

// devOutbox: GET /api/dev/outbox -> {"messages": [...]}, newest first,
// an empty list before the first mail. It is routed only when the outbox
// is the Mailer, and answers only a client on this machine that reached
// the server by a name of this machine (see outboxRefusal).
func (a *App) devOutbox(w http.ResponseWriter, r *http.Request) *apiError {
	if e := a.outboxRefusal(r); e != nil {
		return e
	}
	msgs, _ := a.outbox.messages()
	if msgs == nil {
		msgs = []Message{}
	}
	writeJSON(w, http.StatusOK, struct {
		Messages []Message `json:"messages"`
	}{msgs})
	return nil
}

// outboxRefusal returns the 403 of a request the development outbox must
// not answer, or nil. The outbox holds every sign-up's link, so it
// answers only
//
//   - a client on this machine: the TCP peer is a loopback address;
//   - that asked for this machine by name: the Host is localhost, a name
//     under .localhost, a loopback address, or the host of
//     Config.PublicURL. A page on any site can make its visitor's
//     browser read its own origin, and a name it controls can resolve to
//     127.0.0.1 (DNS rebinding): the browser then sends that name as the
//     Host, which this check refuses;
//   - not through a proxy: a request with Forwarded, X-Forwarded-For,
//     X-Real-IP or Via came through one, and behind a proxy on this
//     machine every client is a loopback peer.
func (a *App) outboxRefusal(r *http.Request) *apiError {
	if !isLoopback(clientIP(r)) {
		return &apiError{status: http.StatusForbidden, msg: "the development outbox answers this machine only"}
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip", "Via"} {
		if r.Header.Get(h) != "" {
			return &apiError{status: http.StatusForbidden, msg: "the development outbox answers no request that came through a proxy (" + h + ")"}
		}
	}
	if !a.isOwnHost(r.Host) {
		return &apiError{status: http.StatusForbidden, msg: "the development outbox answers requests for localhost or a loopback address only, not for Host " + strconv.Quote(r.Host)}
	}
	return nil
}

// isOwnHost reports whether host, a request's Host (name or address,
// with or without a port), names this machine: localhost, a name under
// .localhost (which browsers resolve to loopback themselves, RFC 6761),
// a loopback address, or the host of the public URL.
func (a *App) isOwnHost(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if name == "" {
		return false
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") || isLoopback(name) {
		return true
	}
	u, err := url.Parse(a.publicURL)
	return err == nil && strings.EqualFold(u.Hostname(), name)
}

// verifyMessage is the mail of a sign-up: the link that finishes it.
func verifyMessage(to, link string) Message {
	return Message{To: to, Subject: "Finish signing up to the snowkey example", Body: "Someone, probably you, signed up to the snowkey example with this address.\n\n" +
		"To finish, open this link and type the password you chose:\n\n" + link + "\n\n" +
		"The link works once, for " + strconv.Itoa(int(verifyTTL.Hours())) + " hours. If it was not you, ignore this mail: no account is made.\n"}
}

// takenMessage is the mail to the owner of an address that someone tried
// to sign up with again.
func takenMessage(to, page string) Message {
	return Message{To: to, Subject: "Someone tried to sign up with your address", Body: "Someone, perhaps you, tried to sign up to the snowkey example with this address, " +
		"which has an account already. Nothing has changed.\n\n" +
		"If it was you, log in with your password at " + page + ".\n" +
		"If it was not, you need do nothing: nobody can sign up with your address.\n"}
}
