package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/gocmd"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestStartup builds the server, as `go run` would, starts it with no
// environment but PORT or -addr, so on the embedded defaults, signs up,
// follows the mailed link and logs in, reads the operators' listener, and
// stops it with SIGTERM. With PORT, as hosting platforms set it, it
// listens on every interface, so it needs SMTP_URL: the mail goes through
// an SMTP server of the test's; on loopback it goes to the development
// outbox.
func TestStartup(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 8*time.Minute)
	if testing.Short() {
		testenv.Skip(t, "-short: the test builds the server binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Skip(t, "no go command in PATH to build the server: "+err.Error())
	}
	bin := filepath.Join(t.TempDir(), "server")
	// The build ends with the test's Deadline, which stretches with the
	// machine's load: a cold build cache under load needs minutes.
	build := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	build.Env = gocmd.Env() // as this binary was built: its packages are in the build cache
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	sink := startSMTP(t, "", "", nil)
	tests := []struct {
		name string
		args []string
		env  []string
		host string // of the URL the server prints
		smtp bool   // mail goes to the sink; else to the outbox
	}{
		{name: "PORT", env: []string{"PORT=0", "METRICS_ADDR=127.0.0.1:0", "SMTP_URL=smtp://" + sink.addr, "MAIL_FROM=noreply@example.test"},
			host: "localhost", smtp: true},
		{name: "addr flag", args: []string{"-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0"}, env: []string{"PORT=1"}, host: "127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			// Only what a newcomer's shell would have: no DATABASE_URL,
			// no REDIS_URL.
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, tc.env...)
			cmd.Dir = t.TempDir() // anything it wrote would land here
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The reader owns the pipe: lines in order, closed at EOF;
			// then exited is closed with waitErr set.
			lines := make(chan string, 1000)
			exited := make(chan struct{})
			var waitErr error
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
				waitErr = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})

			var log []string
			url, ops := "", ""
			re := regexp.MustCompile(`msg=listening url=(http://` + regexp.QuoteMeta(tc.host) + `:\d+/)`)
			opsRE := regexp.MustCompile(`msg="operators' listener" metrics=(http://127\.0\.0\.1:\d+/)metrics`)
			deadline := time.After(time.Minute)
			for url == "" {
				select {
				case line, ok := <-lines:
					if !ok {
						<-exited
						t.Fatalf("the server exited before listening: %v\n%s", waitErr, strings.Join(log, "\n"))
					}
					log = append(log, line)
					if m := re.FindStringSubmatch(line); m != nil {
						url = m[1]
					}
					if m := opsRE.FindStringSubmatch(line); m != nil {
						ops = m[1]
					}
				case <-deadline:
					t.Fatalf("no 'listening' line within a minute:\n%s", strings.Join(log, "\n"))
				}
			}
			if !strings.Contains(log[0], "embedded SQLite in memory") || !strings.Contains(log[0], "in-process miniredis on loopback, behind a password") {
				t.Errorf("the first log line does not say it runs on embedded defaults: %s", log[0])
			}
			if ops == "" {
				t.Fatalf("no operators' listener in the log:\n%s", strings.Join(log, "\n"))
			}

			creds := `{"email":"newcomer@example.com","password":"` + goodPassword + `"}`
			signup := `{"email":"newcomer@example.com","password":"` + goodPassword + `","name":"Newcomer"}`
			verify := func() string {
				var tok string
				if tc.smtp {
					mails, _ := sink.received()
					if len(mails) == 0 {
						t.Fatal("the sign-up sent no mail to the SMTP server")
					}
					if m := verifyTokenRE.FindStringSubmatch(mails[len(mails)-1].body); m != nil {
						tok = m[1]
					}
				} else {
					tok = outboxToken(t, strings.TrimSuffix(url, "/"), "newcomer@example.com")
				}
				return `{"token":"` + tok + `","password":"` + goodPassword + `"}`
			}
			for _, step := range []struct {
				method, base, path string
				body               func() string
				want               int
			}{
				{"GET", url, "", nil, 200},
				{"POST", url, "api/signup", func() string { return signup }, 202},
				{"POST", url, "api/verify", verify, 200},
				{"POST", url, "api/login", func() string { return creds }, 200},
				{"GET", url, "api/me", nil, 401},
				{"GET", url, "healthz", nil, 200},
				{"GET", url, "readyz", nil, 200},
				{"GET", url, "metrics", nil, 404},
				{"GET", ops, "metrics", nil, 200},
				{"GET", ops, "readyz", nil, 200},
			} {
				body := ""
				if step.body != nil {
					body = step.body()
				}
				req, err := http.NewRequestWithContext(t.Context(), step.method, step.base+step.path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s %s%s: %v", step.method, step.base, step.path, err)
				}
				res.Body.Close()
				if res.StatusCode != step.want {
					t.Errorf("%s %s%s: %d, want %d", step.method, step.base, step.path, res.StatusCode, step.want)
				}
			}

			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("the server did not exit within 30s of SIGTERM")
			}
			for line := range lines {
				log = append(log, line)
			}
			if waitErr != nil {
				t.Errorf("after SIGTERM the server exited with %v, want status 0:\n%s", waitErr, strings.Join(log, "\n"))
			}
			if !strings.Contains(strings.Join(log, "\n"), `msg="shutting down"`) {
				t.Errorf("no shutdown line in the log:\n%s", strings.Join(log, "\n"))
			}
		})
	}
}
