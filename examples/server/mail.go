package main

import (
	"context"
	"net/http"
	"slices"
	"strconv"
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

// devOutbox: GET /api/dev/outbox -> {"messages": [...]}, newest first. It
// is routed only when the outbox is the Mailer, and answers only clients
// on this machine.
func (a *App) devOutbox(w http.ResponseWriter, r *http.Request) *apiError {
	if !isLoopback(clientIP(r)) {
		return &apiError{status: http.StatusForbidden, msg: "the development outbox answers this machine only"}
	}
	msgs, _ := a.outbox.messages()
	writeJSON(w, http.StatusOK, struct {
		Messages []Message `json:"messages"`
	}{msgs})
	return nil
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
