package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestPassword(t *testing.T) {
	t.Parallel()
	p := Argon2Params{Memory: 1024, Time: 1, Threads: 1} // cheap: the format is under test here
	hash, err := hashPassword("correct horse", p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=1024,t=1,p=1$") {
		t.Fatalf("hash %q is not a PHC argon2id string", hash)
	}
	other, _ := hashPassword("correct horse", p)
	if other == hash {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, tc := range []struct {
		name, password, hash string
		ok                   bool
		err                  error
	}{
		{"right", "correct horse", hash, true, nil},
		{"wrong", "correct horse!", hash, false, nil},
		{"empty", "", hash, false, nil},
		{"default cost", "x", mustHash(t, "x", DefaultArgon2()), true, nil},
		{"not a hash", "x", "plain", false, errBadHash},
		{"bcrypt", "x", "$2a$10$abcdefghijklmnopqrstuv", false, errBadHash},
		{"argon2i", "x", strings.Replace(hash, "argon2id", "argon2i", 1), false, errBadHash},
		{"other version", "x", strings.Replace(hash, "v=19", "v=16", 1), false, errBadHash},
		{"zero memory", "x", strings.Replace(hash, "m=1024", "m=0", 1), false, errBadHash},
		{"junk params", "x", strings.Replace(hash, "m=1024,t=1,p=1", "m=a", 1), false, errBadHash},
		{"bad salt", "x", replaceField(hash, 4, "!!"), false, errBadHash},
		{"empty key", "x", replaceField(hash, 5, ""), false, errBadHash},
		{"extra field", "x", hash + "$x", false, errBadHash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := checkPassword(tc.password, tc.hash)
			if ok != tc.ok || !errors.Is(err, tc.err) {
				t.Errorf("checkPassword = %v, %v; want %v, %v", ok, err, tc.ok, tc.err)
			}
		})
	}
}

func mustHash(t *testing.T, password string, p Argon2Params) string {
	t.Helper()
	h, err := hashPassword(password, p)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// replaceField replaces the i-th $-separated field of a PHC string.
func replaceField(hash string, i int, v string) string {
	f := strings.Split(hash, "$")
	f[i] = v
	return strings.Join(f, "$")
}

func TestDatabaseKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url      string
		postgres bool
		path     string
		bad      bool
	}{
		{url: ""},
		{url: "sqlite:app.db", path: "app.db"},
		{url: "sqlite:/tmp/x/app.db", path: "/tmp/x/app.db"},
		{url: "postgres://u:secret@localhost/db", postgres: true},
		{url: "postgresql://localhost/db?sslmode=disable", postgres: true},
		{url: "sqlite:", bad: true},
		{url: "sqlite:app.db?mode=ro", bad: true},
		{url: "mysql://localhost/db", bad: true},
		{url: "localhost:5432", bad: true},
		{url: "postgres://[::1", bad: true},
	} {
		t.Run(tc.url, func(t *testing.T) {
			k, err := databaseKind(tc.url)
			if tc.bad {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("err = %v, want ErrConfig", err)
				}
				return
			}
			if err != nil || k.postgres != tc.postgres || k.path != tc.path {
				t.Fatalf("databaseKind = %+v, %v", k, err)
			}
			if strings.Contains(k.describe(), "secret") {
				t.Errorf("describe() shows the password: %s", k.describe())
			}
		})
	}
}

func TestOpenBadConfig(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"negative worker", Config{Worker: -1}},
		{"worker too large", Config{Worker: 1024}},
		{"reserved worker", Config{Worker: 1023}},
		{"worker past a narrow layout", Config{Worker: 16, Layout: idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 4, SequenceBits: 12}}},
		{"invalid layout", Config{Layout: idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 40, SequenceBits: 20}}},
		{"postgres with another layout", Config{DatabaseURL: "postgres://u@127.0.0.1:1/db", Layout: idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 8, SequenceBits: 14}}},
		{"bad limit", Config{Throttle: ThrottleOptions{LoginPerIP: redis_rate.Limit{Rate: 1}}}},
		{"negative hash queue", Config{Throttle: ThrottleOptions{HashQueue: -1}}},
		{"bad database URL", Config{DatabaseURL: "mysql://x"}},
		{"bad redis URL", Config{RedisURL: "http://x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = quiet
			app, err := Open(t.Context(), tc.cfg)
			if err == nil {
				app.Close(t.Context())
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("err = %v, want ErrConfig", err)
			}
		})
	}
}

func TestRunFlags(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		env  func(string) string
		want string // in the error
	}{
		{"unknown flag", []string{"-nope"}, env(), "flag provided but not defined"},
		{"argument", []string{"extra"}, env(), `unexpected argument "extra"`},
		{"bad WORKER_ID", nil, env("WORKER_ID", "x"), "WORKER_ID"},
		{"bad worker", []string{"-worker", "-3"}, env(), "Worker -3"},
		{"reserved worker", []string{"-worker", "1023", "-addr", "127.0.0.1:0", "-metrics-addr", "off"}, env(), "Worker 1023 is reserved for PostgreSQL's snowflake_id(); want 1 to 1022"},
		{"reserved WORKER_ID", []string{"-addr", "127.0.0.1:0", "-metrics-addr", "off"}, env("WORKER_ID", "1023"), "reserved"},
		{"worker too large", []string{"-worker", "5000", "-addr", "127.0.0.1:0", "-metrics-addr", "off"}, env(), "does not fit"},
		{"bad addr", []string{"-addr", "256.0.0.1:x"}, env(), "listen on 256.0.0.1:x"},
		{"bad PORT", nil, env("PORT", "notaport"), "listen on :notaport"},
		{"bad metrics address", []string{"-addr", "127.0.0.1:0", "-metrics-addr", "nowhere"}, env(), "listen on -metrics-addr nowhere"},
		{"no SMTP beyond loopback", []string{"-metrics-addr", "off"}, env("PORT", "0"), "SMTP_URL is unset and the server listens on"},
		{"SMTP without MAIL_FROM", []string{"-addr", "127.0.0.1:0", "-metrics-addr", "off"}, env("SMTP_URL", "smtp://relay.example.com"), "MAIL_FROM"},
		{"bad SMTP_URL", []string{"-addr", "127.0.0.1:0", "-metrics-addr", "off"}, env("SMTP_URL", "smtp://u:p@relay.example.com/x", "MAIL_FROM", "a@example.com"), "nothing more"},
		{"bad PUBLIC_URL", []string{"-addr", "127.0.0.1:0", "-metrics-addr", "off"}, env("PUBLIC_URL", "ftp://x"), "PublicURL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t.Context(), tc.args, tc.env, io.Discard, quiet)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestNarrowLayoutWorker runs a fixed worker on a layout without 1023:
// its largest number is allowed there.
func TestNarrowLayoutWorker(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	l := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 4, SequenceBits: 12}
	app, srv := startAppConfig(t, Config{Worker: 15, Layout: l, Throttle: generous()})
	id, _ := signupLogin(t, srv, "narrow@example.com", goodPassword)
	parsed, err := idtype.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	if p := l.Decode(parsed); p.Worker != 15 || app.gen.Worker() != 15 {
		t.Errorf("user ID %s decodes to worker %d in the layout", id, p.Worker)
	}
}

func TestPageURL(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, "http://localhost:8080/"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 80}, "http://localhost:80/"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, "http://127.0.0.1:9/"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9}, "http://[::1]:9/"},
	} {
		if got := pageURL(tc.addr); got != tc.want {
			t.Errorf("pageURL(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestDefaultAddrs: PORT, as hosting platforms set it, moves the public
// listener to every interface and leaves the operators' listener on
// loopback; METRICS_ADDR alone moves that one.
func TestDefaultAddrs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env         map[string]string
		public, ops string
	}{
		{nil, "localhost:8080", "localhost:9090"},
		{map[string]string{"PORT": "8000"}, ":8000", "localhost:9090"},
		{map[string]string{"PORT": "8000", "METRICS_ADDR": "10.0.0.5:9100"}, ":8000", "10.0.0.5:9100"},
	} {
		public, ops := defaultAddrs(func(k string) string { return tc.env[k] })
		if public != tc.public || ops != tc.ops {
			t.Errorf("env %v: public %q, operators' %q; want %q, %q", tc.env, public, ops, tc.public, tc.ops)
		}
	}
}
