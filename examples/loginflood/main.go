// Command loginflood measures what a flood does to the example server and
// to a legitimate user's login meanwhile. It signs up a victim and 40
// bystanders (following the links of the server's development outbox
// when sign-ups need them), then sends -n flood requests at -c
// concurrency from -addresses loopback addresses, and meanwhile logs
// bystanders in, one login at a time, each from another loopback address
// (as many users would, each within their own rate limits). The floods
// (-attack):
//
//	login     wrong passwords for the victim's account
//	stuffing  wrong passwords, each for another unknown email
//	signup    sign-ups of fresh addresses, each with -password, by default
//	          the costliest password found for zxcvbn's l33t matcher
//	none      nothing: the bystanders' logins alone, for -n/-rate seconds,
//	          the baseline of the others on the same machine
//
// -rate paces the flood: an attacker who sends sign-ups as fast as the
// server's bounded queue takes them, instead of all at once (which the
// queue answers 503 at once), keeps the queue full for longer.
//
// It prints the flood's answers by status, the bystanders' login latency
// (p50, p99, max) and statuses, the server's CPU time and password hashes
// over the flood (from its /metrics, -metrics), whether the victim logs
// in after the flood, and one Markdown table row of it all.
//
//	make run &
//	go -C examples run ./loginflood -attack signup -addresses 64 -n 640
//
// It sends traffic only to loopback addresses: the flood comes from
// 127.0.3.1 onwards, the bystanders from 127.0.1.x, the sign-ups from
// 127.0.2.x (Linux routes all of 127.0.0.0/8 to the loopback interface).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loginflood:", err)
		os.Exit(1)
	}
}

// costlyPassword holds every l33t character zxcvbn knows, forwards,
// backwards and rotated, 64 characters that repeat no unit: the costliest
// password found for zxcvbn's own l33t matcher, which tries every
// combination of their substitutions. zxcvbn scores it strong, so a
// sign-up with it is also hashed.
const costlyPassword = "4@8({[<369!|1705$+%2" + "2%+$5071|!963<[{(8@4" + "369!|1705$+%24@8({[<" + "(2@9"

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loginflood", flag.ContinueOnError)
	base := fs.String("url", "http://localhost:8080", "the server's base URL, on a loopback address")
	metricsURL := fs.String("metrics", "http://localhost:9090/metrics", "the server's /metrics, for its CPU time and hashes; empty for none")
	attack := fs.String("attack", "login", "the flood: login, stuffing, signup or none")
	n := fs.Int("n", 300, "requests in the flood")
	c := fs.Int("c", 60, "concurrent flood requests")
	rate := fs.Float64("rate", 0, "flood requests started per second; 0: as fast as the -c connections go")
	addresses := fs.Int("addresses", 1, "loopback addresses the flood comes from, 127.0.3.1 onwards (at most 250)")
	password := fs.String("password", costlyPassword, "the password of the signup flood")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*base)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-url %s is not on a loopback address; this tool floods only this machine", *base)
	}
	if *addresses < 1 || *addresses > 250 {
		return fmt.Errorf("-addresses %d: want 1 to 250", *addresses)
	}
	switch *attack {
	case "login", "stuffing", "signup":
	case "none":
		if *rate <= 0 {
			return errors.New("-attack none needs -rate: it lasts -n/-rate seconds")
		}
	default:
		return fmt.Errorf("-attack %q: want login, stuffing, signup or none", *attack)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	floodClients := make([]*http.Client, *addresses)
	for i := range floodClients {
		floodClients[i] = clientFrom(fmt.Sprintf("127.0.3.%d", i+1), *c)
	}
	// user returns the client of the i-th legitimate login, each from an
	// address of its own.
	user := func(i int) *http.Client { return clientFrom(fmt.Sprintf("127.0.1.%d", 1+i%250), 1) }
	stamp := time.Now().UnixNano()
	victim := fmt.Sprintf("victim-%d@example.com", stamp)
	const bystanders = 40 // each within the per-account limits during a flood of a minute
	bystander := func(i int) string { return fmt.Sprintf("bystander-%d-%d@example.com", i%bystanders, stamp) }
	const good = "plum-kite-orbit-93"
	for i, e := range append([]string{victim}, func() []string {
		var b []string
		for i := range bystanders {
			b = append(b, bystander(i))
		}
		return b
	}()...) {
		if err := account(ctx, clientFrom(fmt.Sprintf("127.0.2.%d", 1+i), 1), *base, e, good); err != nil {
			return err
		}
	}
	// One login before the flood: the baseline latency.
	before, status, err := login(ctx, user(0), *base, bystander(0), good)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("login before the flood: status %d, %v", status, err)
	}
	m0, haveMetrics := scrape(ctx, *metricsURL)

	var (
		mu     sync.Mutex
		counts = map[int]int{}
		wg     sync.WaitGroup
		seq    atomic.Int64
	)
	send := func(i int64) int {
		cl := floodClients[int(i)%len(floodClients)]
		var st int
		var err error
		switch *attack {
		case "login":
			_, st, err = login(ctx, cl, *base, victim, fmt.Sprintf("wrong-guess-%d", i))
		case "stuffing":
			_, st, err = login(ctx, cl, *base, fmt.Sprintf("stuffed-%d-%d@example.com", stamp, i), fmt.Sprintf("wrong-guess-%d", i))
		case "signup":
			st, _, err = post(ctx, cl, *base+"/api/signup", map[string]string{
				"email": fmt.Sprintf("flood-%d-%d@example.com", stamp, i), "password": *password, "name": "Flood"})
		case "none":
			return 0
		}
		if err != nil {
			return -1
		}
		return st
	}
	jobs := make(chan struct{})
	start := time.Now()
	for range *c {
		wg.Go(func() {
			for range jobs {
				st := send(seq.Add(1))
				mu.Lock()
				counts[st]++
				mu.Unlock()
			}
		})
	}
	// The legitimate users log in over and over while the flood runs.
	floodDone := make(chan struct{})
	var lat []time.Duration
	userStatus := map[int]int{}
	var userWG sync.WaitGroup
	userWG.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-floodDone:
				return
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			d, st, err := login(ctx, user(i), *base, bystander(i), good)
			if err != nil {
				st = -1
			}
			userStatus[st]++
			if st == http.StatusOK {
				lat = append(lat, d)
			}
		}
	})
	var tick <-chan time.Time
	if *rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer t.Stop()
		tick = t.C
	}
	for range *n {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
			}
		}
		select {
		case jobs <- struct{}{}:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)
	close(floodDone)
	userWG.Wait()
	m1, _ := scrape(ctx, *metricsURL)

	fmt.Fprintf(out, "flood: %d %s requests at %d-way (%v a second; 0: unpaced) from %d addresses in %v\n", *n, *attack, *c, *rate, *addresses, took.Round(time.Millisecond))
	codes := make([]int, 0, len(counts))
	for k := range counts {
		codes = append(codes, k)
	}
	slices.Sort(codes)
	var answers []string
	for _, k := range codes {
		fmt.Fprintf(out, "  status %d: %d\n", k, counts[k])
		answers = append(answers, fmt.Sprintf("%d×%d", counts[k], k))
	}
	cpu, hashed := "n/a", "n/a"
	if haveMetrics {
		cpu = fmt.Sprintf("%.1f s", m1.cpu-m0.cpu)
		hashed = fmt.Sprintf("%.0f", m1.hashes-m0.hashes)
		fmt.Fprintf(out, "  server CPU over the flood: %s; password-hash pool jobs: %s (the bystanders' %d logins among them)\n", cpu, hashed, len(lat))
	}
	fmt.Fprintf(out, "bystanders' logins, each from its own address: %v before the flood; during it %d logins, statuses %v\n",
		before.Round(time.Millisecond), len(lat), userStatus)
	p50, p99, maxLat := "n/a", "n/a", "n/a"
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		p50, p99, maxLat = ms(q(0.5)), ms(q(0.99)), ms(lat[len(lat)-1])
		fmt.Fprintf(out, "  latency p50 %s, p99 %s, max %s\n", p50, p99, maxLat)
	}
	d, st, err := login(ctx, user(251), *base, victim, good)
	fmt.Fprintf(out, "victim's own login from another address after the flood: status %d in %v (%v)\n", st, d.Round(time.Millisecond), err)
	fmt.Fprintf(out, "| %s | %d | %d | %s | %d (%v) | %s | %s | %s | %s | %s | %.1f s |\n",
		*attack, *addresses, *n, strings.Join(answers, " "), len(lat), userStatus, p50, p99, maxLat, cpu, hashed, took.Seconds())
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// serverMetrics is what the tool reads from /metrics.
type serverMetrics struct{ cpu, hashes float64 }

// scrape reads the server's CPU time and password-hash jobs from its
// Prometheus text.
func scrape(ctx context.Context, u string) (serverMetrics, bool) {
	if u == "" {
		return serverMetrics{}, false
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return serverMetrics{}, false
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return serverMetrics{}, false
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return serverMetrics{}, false
	}
	var m serverMetrics
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		for name, dst := range map[string]*float64{"process_cpu_seconds_total ": &m.cpu, "snowkey_example_password_hashes_total ": &m.hashes} {
			if v, ok := strings.CutPrefix(line, name); ok {
				if _, err := fmt.Sscan(v, dst); err == nil {
					found++
				}
			}
		}
	}
	return m, found == 2
}

// clientFrom returns an HTTP client whose connections come from the
// local address ip.
func clientFrom(ip string, conns int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: conns,
	}, Timeout: 60 * time.Second}
}

func post(ctx context.Context, c *http.Client, u string, body any) (int, []byte, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", u, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(res.Body)
	return res.StatusCode, rb, err
}

// verifyLink finds the token of a sign-up link in a mail.
var verifyLink = regexp.MustCompile(`#verify=([A-Za-z0-9_-]+)`)

// account makes a usable account: a sign-up, and, on a server whose
// sign-ups need it, the link from its development outbox.
func account(ctx context.Context, c *http.Client, base, email, password string) error {
	st, b, err := post(ctx, c, base+"/api/signup", map[string]string{"email": email, "password": password, "name": "Bystander"})
	if err != nil {
		return err
	}
	if st/100 != 2 {
		return errors.New("signup: status " + fmt.Sprint(st) + " " + string(b))
	}
	if _, st, err := login(ctx, c, base, email, password); err == nil && st == http.StatusOK {
		return nil // a server that makes accounts at once
	}
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/dev/outbox", nil)
	if err != nil {
		return err
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var box struct {
		Messages []struct{ To, Body string }
	}
	if err := json.NewDecoder(res.Body).Decode(&box); err != nil || res.StatusCode != http.StatusOK {
		return fmt.Errorf("sign-ups need a mailed link, and the server has no development outbox (status %d): run it without SMTP_URL", res.StatusCode)
	}
	for _, m := range box.Messages {
		if l := verifyLink.FindStringSubmatch(m.Body); m.To == email && l != nil {
			st, b, err := post(ctx, c, base+"/api/verify", map[string]string{"token": l[1], "password": password})
			if err != nil || st != http.StatusOK {
				return fmt.Errorf("verify %s: status %d %s (%v)", email, st, b, err)
			}
			return nil
		}
	}
	return fmt.Errorf("no sign-up link to %s in the outbox", email)
}

func login(ctx context.Context, c *http.Client, base, email, password string) (time.Duration, int, error) {
	start := time.Now()
	st, _, err := post(ctx, c, base+"/api/login", map[string]string{"email": email, "password": password})
	return time.Since(start), st, err
}
