// Command loginflood measures what a password-guessing flood does to the
// example server: it signs up a victim and ten bystanders, sends -n
// wrong-password logins to the victim's account at -c concurrency from
// one loopback address, and meanwhile logs bystanders in, one login at a
// time, each from another loopback address of 127.0.1.0/24 (as many
// users would, each within their own rate limits). It prints the answers the flood
// got, by status, how many reached the password hashes (from /metrics,
// when the server has it), the latency of the bystander's logins, and
// whether the victim can log in from another address after the flood.
//
//	go -C examples run ./server &
//	go -C examples run ./loginflood -url http://localhost:8080
//
// It sends traffic only to loopback addresses: the server sees the flood
// from -flood-ip and the others from 127.0.1.x and 127.0.2.x (Linux routes
// all of 127.0.0.0/8 to the loopback interface).
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
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loginflood:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loginflood", flag.ContinueOnError)
	base := fs.String("url", "http://localhost:8080", "the server's base URL, on a loopback address")
	n := fs.Int("n", 300, "wrong-password logins in the flood")
	c := fs.Int("c", 60, "concurrent flood requests")
	floodIP := fs.String("flood-ip", "127.0.0.2", "loopback address the flood comes from")
	rounds := fs.Int("rounds", 1, "floods to send, one after another, each with -n logins")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole run")
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
	if ip := net.ParseIP(*floodIP); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address", *floodIP)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	flood := clientFrom(*floodIP, *c)
	// user returns the client of the i-th legitimate request, each from
	// an address of its own.
	user := func(i int) *http.Client { return clientFrom(fmt.Sprintf("127.0.1.%d", 1+i%250), 1) }
	stamp := time.Now().UnixNano()
	email := fmt.Sprintf("victim-%d@example.com", stamp)
	const bystanders = 10
	bystander := func(i int) string { return fmt.Sprintf("bystander-%d-%d@example.com", i%bystanders, stamp) }
	const password = "plum-kite-orbit-93"
	for i, e := range []string{email} {
		if err := signup(ctx, clientFrom(fmt.Sprintf("127.0.2.%d", 1+i), 1), *base, e, password); err != nil {
			return err
		}
	}
	for i := range bystanders {
		if err := signup(ctx, clientFrom(fmt.Sprintf("127.0.2.%d", 2+i), 1), *base, bystander(i), password); err != nil {
			return err
		}
	}
	// One login before the flood: the baseline latency.
	before, status, err := login(ctx, user(0), *base, bystander(0), password)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("login before the flood: status %d, %v", status, err)
	}
	hashesBefore, haveMetrics := hashes(ctx, user(0), *base)

	var (
		mu     sync.Mutex
		counts = map[int]int{}
		wg     sync.WaitGroup
	)
	jobs := make(chan int)
	start := time.Now()
	for range *c {
		wg.Go(func() {
			for range jobs {
				_, st, err := login(ctx, flood, *base, email, "wrong-guess-"+fmt.Sprint(time.Now().UnixNano()))
				mu.Lock()
				if err != nil {
					st = -1
				}
				counts[st]++
				mu.Unlock()
			}
		})
	}
	// The legitimate user logs in over and over while the flood runs.
	floodDone := make(chan struct{})
	var lat []time.Duration
	var userStatus = map[int]int{}
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
			d, st, err := login(ctx, user(i), *base, bystander(i), password)
			if err != nil {
				st = -1
			}
			userStatus[st]++
			if st == http.StatusOK {
				lat = append(lat, d)
			}
		}
	})
	for i := range *n * *rounds {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)
	close(floodDone)
	userWG.Wait()

	fmt.Fprintf(out, "flood: %d×%d wrong-password logins at %d-way from %s in %v\n", *rounds, *n, *c, *floodIP, took.Round(time.Millisecond))
	codes := make([]int, 0, len(counts))
	for k := range counts {
		codes = append(codes, k)
	}
	sort.Ints(codes)
	for _, k := range codes {
		fmt.Fprintf(out, "  status %d: %d\n", k, counts[k])
	}
	if after, ok := hashes(ctx, user(0), *base); ok && haveMetrics {
		// The bystander's logins hashed too: count them out.
		fmt.Fprintf(out, "  reached the password hashes: %d\n", int(after-hashesBefore)-len(lat))
	} else {
		fmt.Fprintf(out, "  reached the password hashes: %d (every 401; the server has no /metrics)\n", counts[http.StatusUnauthorized])
	}
	fmt.Fprintf(out, "bystanders' logins, each from its own address: %v before the flood; during it %d logins, statuses %v\n",
		before.Round(time.Millisecond), len(lat), userStatus)
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
		fmt.Fprintf(out, "  latency p50 %v, p99 %v, max %v\n",
			q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	}
	d, st, err := login(ctx, user(251), *base, email, password)
	fmt.Fprintf(out, "victim's own login from another address after the flood: status %d in %v (%v)\n", st, d.Round(time.Millisecond), err)
	return nil
}

// hashes reads snowkey_example_password_hashes_total from /metrics.
func hashes(ctx context.Context, c *http.Client, base string) (float64, bool) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "snowkey_example_password_hashes_total "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f, true
			}
		}
	}
	return 0, false
}

// clientFrom returns an HTTP client whose connections come from the
// local address ip.
func clientFrom(ip string, conns int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: conns,
	}, Timeout: 30 * time.Second}
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

// signup creates the victim account, with a display name if the server
// takes one.
func signup(ctx context.Context, c *http.Client, base, email, password string) error {
	st, b, err := post(ctx, c, base+"/api/signup", map[string]string{"email": email, "password": password, "name": "Victim"})
	if err == nil && st == http.StatusBadRequest && strings.Contains(string(b), `unknown field`) {
		st, b, err = post(ctx, c, base+"/api/signup", map[string]string{"email": email, "password": password})
	}
	if err != nil {
		return err
	}
	if st/100 != 2 {
		return errors.New("signup: status " + fmt.Sprint(st) + " " + string(b))
	}
	return nil
}

func login(ctx context.Context, c *http.Client, base, email, password string) (time.Duration, int, error) {
	start := time.Now()
	st, _, err := post(ctx, c, base+"/api/login", map[string]string{"email": email, "password": password})
	return time.Since(start), st, err
}
