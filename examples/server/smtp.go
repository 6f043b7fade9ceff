package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// SMTPMailer sends mail through an SMTP server (a relay, or a mail
// provider's submission port) with github.com/emersion/go-smtp, one
// connection per mail. NewSMTPMailer makes one from an SMTP_URL.
type SMTPMailer struct {
	addr     string // host:port
	host     string
	implicit bool // smtps://: TLS from the first byte
	startTLS bool // smtp:// to a host other than loopback: STARTTLS, required
	auth     sasl.Client
	from     string
	// tlsConfig is nil for the system's roots; tests set their own.
	tlsConfig *tls.Config
	timeout   time.Duration
}

// smtpTimeout bounds one mail's delivery to the SMTP server.
const smtpTimeout = 30 * time.Second

// NewSMTPMailer returns a mailer for rawURL, one of
//
//	smtp://[user:password@]host[:port]    port 587 by default; STARTTLS required
//	smtps://[user:password@]host[:port]   port 465 by default; TLS from the start
//
// that sends as from (an address, such as "noreply@example.com", or a
// name and address). A user and password authenticate with AUTH PLAIN,
// only ever over TLS. To a loopback host, such as a relay on the same
// machine, smtp:// sends in plain text, with or without AUTH.
func NewSMTPMailer(rawURL, from string) (*SMTPMailer, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: SMTP_URL: %s", ErrConfig, parseErrorText(rawURL, err))
	}
	m := &SMTPMailer{timeout: smtpTimeout}
	port := ""
	switch u.Scheme {
	case "smtp":
		port = "587"
	case "smtps":
		port, m.implicit = "465", true
	default:
		return nil, fmt.Errorf("%w: SMTP_URL: want smtp:// or smtps://, not %q", ErrConfig, u.Scheme+"://")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: SMTP_URL: want smtp(s)://[user:password@]host[:port] and nothing more", ErrConfig)
	}
	m.host = u.Hostname()
	if p := u.Port(); p != "" {
		port = p
	}
	m.addr = net.JoinHostPort(m.host, port)
	m.startTLS = !m.implicit && !isLoopbackHost(m.host)
	if u.User != nil {
		pw, _ := u.User.Password()
		m.auth = sasl.NewPlainClient("", u.User.Username(), pw)
	}
	addr, err := mail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("%w: MAIL_FROM %q is not an address: %v", ErrConfig, from, err)
	}
	m.from = addr.String()
	return m, nil
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	return host == "localhost" || isLoopback(host)
}

// Send delivers m to the SMTP server, within ctx and smtpTimeout.
func (s *SMTPMailer) Send(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.send(ctx, m); err != nil {
		return fmt.Errorf("smtp %s: %w", s.addr, err)
	}
	return nil
}

func (s *SMTPMailer) send(ctx context.Context, m Message) error {
	msg, err := s.compose(m)
	if err != nil {
		return err
	}
	tlsConfig := s.tlsConfig.Clone()
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.ServerName = s.host
	var conn net.Conn
	if s.implicit {
		conn, err = (&tls.Dialer{Config: tlsConfig}).DialContext(ctx, "tcp", s.addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", s.addr)
	}
	if err != nil {
		return err
	}
	// The deadline of ctx bounds every read and write; its end before
	// that (the request gone) unblocks them at once.
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var c *smtp.Client
	if s.startTLS {
		if c, err = smtp.NewClientStartTLS(conn, tlsConfig); err != nil {
			conn.Close()
			return err
		}
	} else {
		c = smtp.NewClient(conn)
	}
	defer c.Close()
	if s.auth != nil {
		if _, isTLS := c.TLSConnectionState(); !isTLS && !isLoopbackHost(s.host) {
			return errors.New("refusing to send a password without TLS")
		}
		if err := c.Auth(s.auth); err != nil {
			return err
		}
	}
	from, _ := mail.ParseAddress(s.from)
	if err := c.SendMail(from.Address, []string{m.To}, bytes.NewReader(msg)); err != nil {
		return err
	}
	return c.Quit()
}

// compose writes m as an RFC 5322 message in UTF-8 plain text, its body
// quoted-printable, every line ending in CRLF.
func (s *SMTPMailer) compose(m Message) ([]byte, error) {
	to, err := mail.ParseAddress(m.To)
	if err != nil {
		return nil, fmt.Errorf("recipient %q: %w", m.To, err)
	}
	var b bytes.Buffer
	header := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	header("From", s.from)
	header("To", to.String())
	header("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	header("Date", time.Now().Format(time.RFC1123Z))
	_, domain, _ := strings.Cut(s.from, "@")
	header("Message-ID", "<"+rand16()+"@"+strings.Trim(domain, "> ")+">")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(strings.ReplaceAll(m.Body, "\n", "\r\n"))); err != nil {
		return nil, err
	}
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// rand16 returns 16 random hexadecimal digits.
func rand16() string { return fmt.Sprintf("%x", randomBytes(8)) }
