package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// TestStartup builds the server, as `go run` would, starts it with no
// environment but PORT or -addr, so on the embedded defaults, signs up
// and logs in, and stops it with SIGTERM.
func TestStartup(t *testing.T) {
	testenv.Deadline(t, 8*time.Minute)
	if testing.Short() {
		testenv.Skip(t, "-short: the test builds the server binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Skip(t, "no go command in PATH to build the server: "+err.Error())
	}
	bin := filepath.Join(t.TempDir(), "server")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	tests := []struct {
		name string
		args []string
		env  []string
		host string // of the URL the server prints
	}{
		{name: "PORT", env: []string{"PORT=0"}, host: "localhost"},
		{name: "addr flag", args: []string{"-addr", "127.0.0.1:0"}, env: []string{"PORT=1"}, host: "127.0.0.1"},
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
			url := ""
			re := regexp.MustCompile(`msg=listening url=(http://` + regexp.QuoteMeta(tc.host) + `:\d+/)`)
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
				case <-deadline:
					t.Fatalf("no 'listening' line within a minute:\n%s", strings.Join(log, "\n"))
				}
			}
			if !strings.Contains(log[0], "embedded SQLite in memory") || !strings.Contains(log[0], "in-process miniredis") {
				t.Errorf("the first log line does not say it runs on embedded defaults: %s", log[0])
			}

			creds := `{"email":"newcomer@example.com","password":"` + goodPassword + `"}`
			signup := `{"email":"newcomer@example.com","password":"` + goodPassword + `","name":"Newcomer"}`
			for _, step := range []struct {
				method, path, body string
				want               int
			}{
				{"GET", "", "", 200},
				{"POST", "api/signup", signup, 202},
				{"POST", "api/login", creds, 200},
				{"GET", "api/me", "", 401},
				{"GET", "healthz", "", 200},
				{"GET", "readyz", "", 200},
				{"GET", "metrics", "", 200},
			} {
				req, err := http.NewRequestWithContext(t.Context(), step.method, url+step.path, strings.NewReader(step.body))
				if err != nil {
					t.Fatal(err)
				}
				if step.body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s /%s: %v", step.method, step.path, err)
				}
				res.Body.Close()
				if res.StatusCode != step.want {
					t.Errorf("%s /%s: %d, want %d", step.method, step.path, res.StatusCode, step.want)
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
