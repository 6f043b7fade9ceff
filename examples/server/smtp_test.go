package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// smtpSink is a real SMTP server (github.com/emersion/go-smtp) on a
// loopback port that keeps what it is sent. With a user set, it takes
// mail only after AUTH PLAIN with that user and password.
type smtpSink struct {
	srv        *smtp.Server
	addr       string
	user, pass string
	mu         sync.Mutex
	mail       []sunkMail
	arrived    chan struct{} // closed and replaced at every mail
}

// sunkMail is one mail the sink took.
type sunkMail struct {
	from, to string
	authed   string // the user that authenticated, or ""
	msg      *mail.Message
	body     string // decoded from quoted-printable
}

// startSMTP starts a sink, with TLS from the first byte when cert is set;
// it stops when the test ends.
func startSMTP(t *testing.T, user, pass string, cert *tls.Certificate) *smtpSink {
	t.Helper()
	s := &smtpSink{user: user, pass: pass, arrived: make(chan struct{})}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &sinkSession{sink: s}, nil }))
	s.srv.Domain = "sink.test"
	s.srv.AllowInsecureAuth = true // loopback; the TLS case has TLS
	s.srv.ReadTimeout, s.srv.WriteTimeout = 30*time.Second, 30*time.Second
	s.srv.ErrorLog = testLogWriter{t}
	var ln net.Listener
	var err error
	if cert != nil {
		ln, err = tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*cert}})
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = s.srv.Close()
		<-done
	})
	return s
}

// testLogWriter passes the SMTP server's log lines to the test's log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Printf(format string, v ...any) { w.t.Logf("smtp sink: "+format, v...) }
func (w testLogWriter) Println(v ...any)               { w.t.Log(append([]any{"smtp sink:"}, v...)...) }

// received returns the mails so far and a channel closed at the next.
func (s *smtpSink) received() ([]sunkMail, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sunkMail(nil), s.mail...), s.arrived
}

// token returns the token of the newest sign-up link the sink took for
// email, or fails the test. The mailer's send ends when the server has
// taken the mail, so a link is here once the sign-up has answered.
func (s *smtpSink) token(t *testing.T, email string) string {
	t.Helper()
	got, _ := s.received()
	for i := len(got) - 1; i >= 0; i-- {
		if tok := verifyTokenRE.FindStringSubmatch(got[i].body); got[i].to == email && tok != nil {
			return tok[1]
		}
	}
	t.Fatalf("no sign-up link to %s among the %d mails the SMTP server took", email, len(got))
	return ""
}

type sinkSession struct {
	sink     *smtpSink
	authed   string
	from, to string
}

func (s *sinkSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *sinkSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.sink.user || pass != s.sink.pass {
			return errors.New("invalid user or password")
		}
		s.authed = user
		return nil
	}), nil
}

func (s *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.sink.user != "" && s.authed == "" {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = to
	return nil
}

func (s *sinkSession) Data(r io.Reader) error {
	msg, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		return err
	}
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	s.sink.mail = append(s.sink.mail, sunkMail{from: s.from, to: s.to, authed: s.authed, msg: msg, body: string(body)})
	close(s.sink.arrived)
	s.sink.arrived = make(chan struct{})
	return nil
}

func (s *sinkSession) Reset()        { s.from, s.to = "", "" }
func (s *sinkSession) Logout() error { return nil }

// TestSignupMail runs sign-ups against a real SMTP server, with AUTH: a
// new address gets a link, which makes the account and logs in; an
// address with an account gets a notice and no link; a login before the
// link is followed answers as a wrong password does; and with the SMTP
// server unreachable, or refusing the password, every sign-up answers 503
// alike.
func TestSignupMail(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	sink := startSMTP(t, "mailer", "s3cret-relay-pass", nil)
	mailer, err := NewSMTPMailer("smtp://mailer:s3cret-relay-pass@"+sink.addr, "snowkey example <noreply@example.test>")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Throttle: generous(), Mailer: mailer, PublicURL: "https://app.example.test/"}
	app, srv := startAppConfig(t, cfg)
	if app.outbox != nil {
		t.Fatal("an App with a Mailer has a development outbox")
	}
	if r := callURL(t, srv.URL+"/api/dev/outbox"); r.status != 404 {
		t.Errorf("GET /api/dev/outbox with SMTP: %d, want 404", r.status)
	}

	signup := func(email, password string) response {
		return call(t, srv, "POST", "/api/signup", "", `{"email":"`+email+`","password":"`+password+`","name":"Sam"}`)
	}
	if r := signup("sam@example.com", goodPassword); r.status != 202 {
		t.Fatalf("signup: %d %s", r.status, r.body)
	}
	got, _ := sink.received()
	if len(got) != 1 {
		t.Fatalf("%d mails after a sign-up, want 1", len(got))
	}
	m := got[0]
	if m.from != "noreply@example.test" || m.to != "sam@example.com" || m.authed != "mailer" ||
		m.msg.Header.Get("To") != "<sam@example.com>" || !strings.Contains(m.msg.Header.Get("Subject"), "signing up") {
		t.Errorf("the mail: from %q to %q, authenticated as %q, headers %v", m.from, m.to, m.authed, m.msg.Header)
	}
	link := verifyTokenRE.FindStringSubmatch(m.body)
	if link == nil || !strings.Contains(m.body, "https://app.example.test/#verify="+link[1]) {
		t.Fatalf("no link to PublicURL in the mail:\n%s", m.body)
	}
	if r := call(t, srv, "POST", "/api/login", "", `{"email":"sam@example.com","password":"`+goodPassword+`"}`); r.status != 401 {
		t.Errorf("login before the link is followed: %d %s, want 401", r.status, r.body)
	}
	if r := call(t, srv, "POST", "/api/verify", "", mustJSON(t, map[string]string{"token": link[1], "password": goodPassword})); r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	if r := call(t, srv, "POST", "/api/verify", "", mustJSON(t, map[string]string{"token": link[1], "password": goodPassword})); r.status != 410 {
		t.Errorf("the link a second time: %d %s, want 410", r.status, r.body)
	}
	if r := call(t, srv, "POST", "/api/login", "", `{"email":"sam@example.com","password":"`+goodPassword+`"}`); r.status != 200 {
		t.Errorf("login after the link: %d %s", r.status, r.body)
	}

	// The address has an account now: a notice, no link.
	if r := signup("sam@example.com", attackerPassword); r.status != 202 {
		t.Fatalf("signup of a taken address: %d %s", r.status, r.body)
	}
	got, _ = sink.received()
	if n := got[len(got)-1]; len(got) != 2 || n.to != "sam@example.com" || verifyTokenRE.MatchString(n.body) || !strings.Contains(n.body, "has an account already") {
		t.Errorf("after a sign-up of a taken address: %d mails, the last to %s:\n%s", len(got), n.to, n.body)
	}

	// The SMTP server refuses the password, or is gone: every sign-up
	// answers 503 alike.
	wrong, err := NewSMTPMailer("smtp://mailer:wrong@"+sink.addr, "noreply@example.test")
	if err != nil {
		t.Fatal(err)
	}
	app.mailer = wrong
	taken, fresh := signup("sam@example.com", attackerPassword), signup("new@example.com", attackerPassword)
	if taken.status != 503 || fresh.status != 503 || string(taken.body) != string(fresh.body) {
		t.Errorf("with the SMTP password refused: %d %s and %d %s; want one 503", taken.status, taken.body, fresh.status, fresh.body)
	}
	app.mailer = mailer
	if err := sink.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if r := signup("late@example.com", goodPassword); r.status != 503 {
		t.Errorf("with the SMTP server gone: %d %s, want 503", r.status, r.body)
	}
}

// TestSMTPTLS sends a mail over TLS from the first byte (smtps://) to a
// server whose certificate the mailer is told to trust, and sees one it
// is not told to trust refused.
func TestSMTPTLS(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, time.Minute)
	cert, pool := selfSigned(t)
	sink := startSMTP(t, "mailer", "pw-over-tls", &cert)
	m, err := NewSMTPMailer("smtps://mailer:pw-over-tls@"+sink.addr, "noreply@example.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Send(ctx, Message{To: "a@example.com", Subject: "über", Body: "line 1\nline 2 = two\n"}); err == nil {
		t.Fatal("a server with a certificate nobody vouches for was trusted")
	}
	m.tlsConfig = &tls.Config{RootCAs: pool}
	if err := m.Send(ctx, Message{To: "a@example.com", Subject: "über", Body: "line 1\nline 2 = two\n"}); err != nil {
		t.Fatal(err)
	}
	got, _ := sink.received()
	if len(got) != 1 || got[0].authed != "mailer" || got[0].body != "line 1\r\nline 2 = two\r\n" {
		t.Fatalf("over TLS: %+v", got)
	}
	if subj, err := new(mime.WordDecoder).DecodeHeader(got[0].msg.Header.Get("Subject")); err != nil || subj != "über" {
		t.Errorf("subject %q (%v)", got[0].msg.Header.Get("Subject"), err)
	}
}

// selfSigned makes a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sink.test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func TestNewSMTPMailer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, from string
		addr      string // "" if refused
		implicit  bool
		startTLS  bool
		auth      bool
		err       string
	}{
		{url: "smtp://relay.example.com", from: "a@example.com", addr: "relay.example.com:587", startTLS: true},
		{url: "smtp://u:p@relay.example.com:2525", from: "a@example.com", addr: "relay.example.com:2525", startTLS: true, auth: true},
		{url: "smtps://u:p@mail.example.com", from: "Example <a@example.com>", addr: "mail.example.com:465", implicit: true, auth: true},
		{url: "smtp://127.0.0.1:25", from: "a@example.com", addr: "127.0.0.1:25"},
		{url: "smtp://localhost", from: "a@example.com", addr: "localhost:587"},
		{url: "smtp://[::1]:25", from: "a@example.com", addr: "[::1]:25"},
		{url: "http://relay.example.com", from: "a@example.com", err: "want smtp:// or smtps://"},
		{url: "smtp://relay.example.com/x", from: "a@example.com", err: "nothing more"},
		{url: "smtp://relay.example.com?tls=off", from: "a@example.com", err: "nothing more"},
		{url: "smtp://", from: "a@example.com", err: "nothing more"},
		{url: "smtp://relay.example.com", from: "not an address", err: "MAIL_FROM"},
		{url: "smtp://u:p/w@relay.example.com", from: "a@example.com", err: "withheld"},
	} {
		m, err := NewSMTPMailer(tc.url, tc.from)
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "p/w") {
				t.Errorf("%s: %v, want ErrConfig saying %q and no password", tc.url, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if m.addr != tc.addr || m.implicit != tc.implicit || m.startTLS != tc.startTLS || (m.auth != nil) != tc.auth {
			t.Errorf("%s: addr %s, implicit %v, STARTTLS %v, auth %v", tc.url, m.addr, m.implicit, m.startTLS, m.auth != nil)
		}
	}
}
