// Command loginflood measures what a flood does to the example server and
// to legitimate users' logins meanwhile, beside the same logins with no
// flood, in one run. It signs up a victim and -bystanders users
// (following the links of the server's development outbox when sign-ups
// need them), each logged in from -devices devices (each device keeps
// the device cookie its logins set, as a browser does). Then it logs
// bystanders in for -baseline, one login at a time, each from another
// loopback address (as many users would, each within their own rate
// limits): the baseline. Then it sends -n flood requests at -c
// concurrency from -addresses loopback addresses, and logs bystanders
// in the same way meanwhile. The floods (-attack):
//
//	login     wrong passwords for the victim's account
//	stuffing  wrong passwords, each for another unknown email
//	signup    sign-ups of fresh addresses, each with -password, by default
//	          the costliest password found for zxcvbn's l33t matcher
//	none      nothing: the bystanders' logins alone, for -n/-rate seconds
//
// -rate paces the flood: an attacker who sends requests as fast as the
// server's bounded queue takes them, instead of all at once (which the
// queue answers 503 at once), keeps the queue full for longer. With
// -known=false the bystanders bring no device cookie, as on a device
// they never logged in from.
//
// It prints the flood's answers by status; the bystanders' login latency
// (p50, p99, max) and statuses in the baseline and under the flood, and
// the ratio of the two p99s; the server's CPU time and password hashes
// in each phase (from its /metrics, -metrics); whether the victim logs in
// after the flood; and one Markdown table row of it all. The machine's
// other load moves every figure: compare a flood with the baseline of
// its own run, and take the median of several runs.
//
//	make run &
//	go -C examples run ./loginflood -attack stuffing -addresses 64 -n 3000 -rate 100
//
// It sends traffic only to loopback addresses: the flood comes from
// 127.0.3.1 onwards, the bystanders from 127.0.1.x, the sign-ups from
// 127.0.2.x, the bystanders' other devices' first logins from 127.0.4.x
// onwards (Linux routes all of 127.0.0.0/8 to the loopback interface).
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
	baseline := fs.Duration("baseline", 20*time.Second, "how long the bystanders log in before the flood, with none")
	bystanders := fs.Int("bystanders", 40, "legitimate users who log in meanwhile")
	devicesPer := fs.Int("devices", 4, "devices each bystander logs in from (each device's own limit allows 5 logins at once, then 1 a minute)")
	known := fs.Bool("known", true, "bystanders bring the device cookie of their earlier logins")
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
	if *bystanders < 1 || *bystanders > 240 || *devicesPer < 1 || *bystanders**devicesPer > 1000 {
		return fmt.Errorf("-bystanders %d -devices %d: want 1 to 240 bystanders, and at most 1000 devices in all", *bystanders, *devicesPer)
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
	bystander := func(i int) string { return fmt.Sprintf("bystander-%d-%d@example.com", i%*bystanders, stamp) }
	const good = "plum-kite-orbit-93"
	if _, err := account(ctx, clientFrom("127.0.2.1", 1), *base, victim, good); err != nil {
		return err
	}
	// devices[k] is the device cookie of device k%devicesPer of bystander
	// k/devicesPer: the first from the sign-up's verification, the others
	// from a login each.
	devices := make([]string, *bystanders**devicesPer)
	for b := range *bystanders {
		cookie, err := account(ctx, clientFrom(fmt.Sprintf("127.0.2.%d", 2+b), 1), *base, bystander(b), good)
		if err != nil {
			return err
		}
		devices[b**devicesPer] = cookie
		for d := 1; d < *devicesPer; d++ {
			n := b**devicesPer + d
			_, st, cookie, err := login(ctx, clientFrom(fmt.Sprintf("127.0.%d.%d", 4+n/250, 1+n%250), 1), *base, bystander(b), good, "")
			if err != nil || st != http.StatusOK {
				return fmt.Errorf("a bystander's login from device %d: status %d, %v", d, st, err)
			}
			devices[n] = cookie
		}
	}
	// bystanderLogins logs bystanders in, one at a time, each login by the
	// next device, until done is closed, and returns the latencies of the
	// logins answered 200 and the count of each status.
	next := 0
	bystanderLogins := func(done <-chan struct{}) ([]time.Duration, map[int]int) {
		var lat []time.Duration
		statuses := map[int]int{}
		for {
			select {
			case <-done:
				return lat, statuses
			case <-ctx.Done():
				return lat, statuses
			case <-time.After(20 * time.Millisecond):
			}
			k := next % len(devices)
			b := k / *devicesPer
			var cookie string
			if *known {
				cookie = devices[k]
			}
			d, st, renewed, err := login(ctx, user(next), *base, bystander(b), good, cookie)
			next++
			if err != nil {
				st = -1
			}
			statuses[st]++
			if st == http.StatusOK {
				lat = append(lat, d)
				if renewed != "" {
					devices[k] = renewed
				}
			}
		}
	}

	b0, haveMetrics := scrape(ctx, *metricsURL)
	baselineDone := make(chan struct{})
	time.AfterFunc(*baseline, func() { close(baselineDone) })
	baseLat, baseStatus := bystanderLogins(baselineDone)
	m0, _ := scrape(ctx, *metricsURL)

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
			_, st, _, err = login(ctx, cl, *base, victim, fmt.Sprintf("wrong-guess-%d", i), "")
		case "stuffing":
			_, st, _, err = login(ctx, cl, *base, fmt.Sprintf("stuffed-%d-%d@example.com", stamp, i), fmt.Sprintf("wrong-guess-%d", i), "")
		case "signup":
			st, _, _, err = post(ctx, cl, *base+"/api/signup", map[string]string{
				"email": fmt.Sprintf("flood-%d-%d@example.com", stamp, i), "password": *password, "name": "Flood"}, "")
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
	var userStatus map[int]int
	var userWG sync.WaitGroup
	userWG.Go(func() { lat, userStatus = bystanderLogins(floodDone) })
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
	cpu, hashed, baseCPU := "n/a", "n/a", "n/a"
	if haveMetrics {
		baseCPU = fmt.Sprintf("%.1f s", m0.cpu-b0.cpu)
		cpu = fmt.Sprintf("%.1f s", m1.cpu-m0.cpu)
		hashed = fmt.Sprintf("%.0f", m1.hashes-m0.hashes)
		fmt.Fprintf(out, "  server CPU over the flood: %s in %v (the baseline: %s in %v); password-hash pool jobs: %s (the bystanders' %d logins among them)\n",
			cpu, took.Round(time.Millisecond), baseCPU, *baseline, hashed, len(lat))
	}
	who := "from a known device (with its device cookie)"
	if !*known {
		who = "from a new device (no device cookie)"
	}
	fmt.Fprintf(out, "bystanders' logins, each %s and from its own address:\n", who)
	baseQ, underQ := summarize(baseLat), summarize(lat)
	fmt.Fprintf(out, "  baseline, no flood, %v: %d logins, statuses %v; latency p50 %s, p99 %s, max %s\n",
		*baseline, len(baseLat), baseStatus, ms(baseQ.p50), ms(baseQ.p99), ms(baseQ.max))
	fmt.Fprintf(out, "  under the flood:       %d logins, statuses %v; latency p50 %s, p99 %s, max %s\n",
		len(lat), userStatus, ms(underQ.p50), ms(underQ.p99), ms(underQ.max))
	ratio := "n/a"
	if baseQ.p99 > 0 && underQ.p99 > 0 {
		ratio = fmt.Sprintf("%.2f", float64(underQ.p99)/float64(baseQ.p99))
	}
	fmt.Fprintf(out, "  p99 under the flood / baseline p99: %s; 503s under the flood: %d\n", ratio, userStatus[http.StatusServiceUnavailable])
	d, st, _, err := login(ctx, user(251), *base, victim, good, "")
	fmt.Fprintf(out, "victim's own login from another address after the flood: status %d in %v (%v)\n", st, d.Round(time.Millisecond), err)
	fmt.Fprintf(out, "| %s | %d | %d | %s | %s / %s | %s / %s | %s | %d | %v | %s / %s | %s | %.1f s |\n",
		*attack, *addresses, *n, strings.Join(answers, " "), ms(baseQ.p50), ms(baseQ.p99), ms(underQ.p50), ms(underQ.p99), ratio,
		userStatus[http.StatusServiceUnavailable], userStatus, baseCPU, cpu, hashed, took.Seconds())
	return nil
}

// latencies are the quantiles of a phase's logins; zero when it had none.
type latencies struct{ p50, p99, max time.Duration }

func summarize(lat []time.Duration) latencies {
	if len(lat) == 0 {
		return latencies{}
	}
	lat = slices.Clone(lat)
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return latencies{q(0.5), q(0.99), lat[len(lat)-1]}
}

func ms(d time.Duration) string {
	if d == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

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

// post sends body as JSON, with the device cookie cookie unless it is
// "", and returns the status, the answer's body and the device cookie it
// set, if any.
func post(ctx context.Context, c *http.Client, u string, body any, cookie string) (int, []byte, string, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", u, bytes.NewReader(b))
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: deviceCookie, Value: cookie})
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(res.Body)
	set := ""
	for _, ck := range res.Cookies() {
		if ck.Name == deviceCookie {
			set = ck.Value
		}
	}
	return res.StatusCode, rb, set, err
}

// verifyLink finds the token of a sign-up link in a mail.
var verifyLink = regexp.MustCompile(`#verify=([A-Za-z0-9_-]+)`)

// deviceCookie is the name of the example server's device cookie.
const deviceCookie = "__Host-device"

// account makes a usable account: a sign-up, and, on a server whose
// sign-ups need it, the link from its development outbox. It returns the
// device cookie the first login set.
func account(ctx context.Context, c *http.Client, base, email, password string) (string, error) {
	st, b, _, err := post(ctx, c, base+"/api/signup", map[string]string{"email": email, "password": password, "name": "Bystander"}, "")
	if err != nil {
		return "", err
	}
	if st/100 != 2 {
		return "", errors.New("signup: status " + fmt.Sprint(st) + " " + string(b))
	}
	if _, st, cookie, err := login(ctx, c, base, email, password, ""); err == nil && st == http.StatusOK {
		return cookie, nil // a server that makes accounts at once
	}
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/dev/outbox", nil)
	if err != nil {
		return "", err
	}
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var box struct {
		Messages []struct{ To, Body string }
	}
	if err := json.NewDecoder(res.Body).Decode(&box); err != nil || res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("sign-ups need a mailed link, and the server has no development outbox (status %d): run it without SMTP_URL", res.StatusCode)
	}
	for _, m := range box.Messages {
		if l := verifyLink.FindStringSubmatch(m.Body); m.To == email && l != nil {
			st, b, cookie, err := post(ctx, c, base+"/api/verify", map[string]string{"token": l[1], "password": password}, "")
			if err != nil || st != http.StatusOK {
				return "", fmt.Errorf("verify %s: status %d %s (%v)", email, st, b, err)
			}
			return cookie, nil
		}
	}
	return "", fmt.Errorf("no sign-up link to %s in the outbox", email)
}

// login logs in to email with password, bringing the device cookie
// cookie unless it is "", and returns how long it took, the status and
// the device cookie the answer set, if any.
func login(ctx context.Context, c *http.Client, base, email, password, cookie string) (time.Duration, int, string, error) {
	start := time.Now()
	st, _, renewed, err := post(ctx, c, base+"/api/login", map[string]string{"email": email, "password": password}, cookie)
	return time.Since(start), st, renewed, err
}
