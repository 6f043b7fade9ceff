package tokens_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/tokens"
)

// newManager builds a Manager over an in-process miniredis, so that the
// examples run anywhere; production code passes its *redis.Client (from
// redis.NewClient, or redis.NewFailoverClient for Sentinel) or
// *redis.ClusterClient instead.
func newManager() (*tokens.Manager, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	if err != nil {
		log.Fatal(err)
	}
	m, err := tokens.New(rdb, gen, tokens.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return m, func() { rdb.Close(); mr.Close() }
}

func Example() {
	m, done := newManager()
	defer done()
	ctx := context.Background()
	const user = idtype.ID(1863486340915077120)

	// At login: the token goes to the client, and only there.
	tok, sess, err := m.Issue(ctx, user, tokens.Metadata{Device: "Anna's phone"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token prefix:", tok[:4], "length:", len(tok))
	fmt.Println("holds the user ID:", strings.Contains(tok, user.String()))

	// On every request.
	s, err := m.Validate(ctx, tok)
	fmt.Println("valid:", err == nil, "user:", s.UserID, "same session:", s.ID == sess.ID)

	// At logout.
	if err := m.Revoke(ctx, tok); err != nil {
		log.Fatal(err)
	}
	_, err = m.Validate(ctx, tok)
	fmt.Println("after logout:", err, errors.Is(err, tokens.ErrInvalidToken))
	// Output:
	// token prefix: snk_ length: 67
	// holds the user ID: false
	// valid: true user: 1863486340915077120 same session: true
	// after logout: tokens: invalid token true
}

func ExampleManager_Middleware() {
	m, done := newManager()
	defer done()
	tok, _, err := m.Issue(context.Background(), 42, tokens.Metadata{})
	if err != nil {
		log.Fatal(err)
	}

	me := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := tokens.FromContext(r.Context())
		fmt.Fprintf(w, "hello, user %d", s.UserID)
	})
	srv := httptest.NewServer(m.Middleware(me))
	defer srv.Close()

	for _, auth := range []string{"", "Bearer " + tok, "Bearer snk_forged", "Bearer"} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %q %s\n", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), strings.TrimSpace(string(body)))
	}
	// Output:
	// 401 "Bearer realm=\"api\"" Unauthorized
	// 200 "" hello, user 42
	// 401 "Bearer realm=\"api\", error=\"invalid_token\"" Unauthorized
	// 400 "Bearer realm=\"api\", error=\"invalid_request\"" Bad Request
}

func ExampleNewMiddleware() {
	m, done := newManager()
	defer done()
	tok, _, err := m.Issue(context.Background(), 42, tokens.Metadata{})
	if err != nil {
		log.Fatal(err)
	}

	// A client that cannot set Authorization sends the bare token in a
	// header of its own; challenges name the app's realm.
	auth, err := tokens.NewMiddleware(m, tokens.MiddlewareOptions{Header: "X-Session", Realm: "notes"})
	if err != nil {
		log.Fatal(err)
	}
	me := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := tokens.FromContext(r.Context())
		fmt.Fprintf(w, "hello, user %d", s.UserID)
	})
	srv := httptest.NewServer(auth(me))
	defer srv.Close()

	for _, h := range [][2]string{{"X-Session", tok}, {"Authorization", "Bearer " + tok}, {"X-Session", "snk_forged"}, {"", ""}} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if h[0] != "" {
			req.Header.Set(h[0], h[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %q %s\n", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), strings.TrimSpace(string(body)))
	}
	_, err = tokens.NewMiddleware(m, tokens.MiddlewareOptions{Header: "Authorization"})
	fmt.Println(errors.Is(err, idtype.ErrInvalidOptions), err)
	// Output:
	// 200 "" hello, user 42
	// 200 "" hello, user 42
	// 401 "Bearer realm=\"notes\", error=\"invalid_token\"" Unauthorized
	// 401 "Bearer realm=\"notes\"" Unauthorized
	// true idtype: invalid options: Header is Authorization, which is always read
}

func ExampleManager_List() {
	m, done := newManager()
	defer done()
	ctx := context.Background()
	for _, dev := range []string{"phone", "laptop", "tablet"} {
		if _, _, err := m.Issue(ctx, 42, tokens.Metadata{Device: dev}); err != nil {
			log.Fatal(err)
		}
	}
	sessions, err := m.List(ctx, 42)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range sessions { // newest first
		fmt.Println(s.Device)
	}
	// Output:
	// tablet
	// laptop
	// phone
}

func ExampleManager_RevokeAll() {
	m, done := newManager()
	defer done()
	ctx := context.Background()
	phone, _, _ := m.Issue(ctx, 42, tokens.Metadata{Device: "phone"})
	laptop, current, _ := m.Issue(ctx, 42, tokens.Metadata{Device: "laptop"})

	// "Log out everywhere else", from the laptop.
	n, err := m.RevokeAll(ctx, 42, current.ID)
	if err != nil {
		log.Fatal(err)
	}
	_, phoneErr := m.Validate(ctx, phone)
	_, laptopErr := m.Validate(ctx, laptop)
	fmt.Println("revoked:", n, "phone:", phoneErr, "laptop:", laptopErr)
	// Output:
	// revoked: 1 phone: tokens: invalid token laptop: <nil>
}

func ExampleManager_RevokeSession() {
	m, done := newManager()
	defer done()
	ctx := context.Background()
	phone, _, _ := m.Issue(ctx, 42, tokens.Metadata{Device: "phone"})
	m.Issue(ctx, 42, tokens.Metadata{Device: "laptop"})

	// The user picks the phone from their session list.
	sessions, _ := m.List(ctx, 42)
	for _, s := range sessions {
		if s.Device == "phone" {
			ok, err := m.RevokeSession(ctx, 42, s.ID)
			fmt.Println("revoked the phone:", ok, err)
		}
	}
	_, err := m.Validate(ctx, phone)
	fmt.Println("phone's token:", err)
	// Output:
	// revoked the phone: true <nil>
	// phone's token: tokens: invalid token
}

func ExampleManager_Rotate() {
	m, done := newManager()
	defer done()
	ctx := context.Background()
	old, first, _ := m.Issue(ctx, 42, tokens.Metadata{})

	tok, s, err := m.Rotate(ctx, old)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("new session ID:", s.ID != first.ID, "same absolute end:", s.AbsoluteExpiresAt.Equal(first.AbsoluteExpiresAt))

	// For Options.RotationGrace, the old token stands for the new session,
	// for the requests sent with it before this answer came back: another
	// tab's, or a second click that rotates again and gets the same token.
	inFlight, _ := m.Validate(ctx, old)
	again, _, _ := m.Rotate(ctx, old)
	fmt.Println("old token serves:", inFlight.ID == s.ID, "second rotation agrees:", again == tok)

	// A revocation ends both at once, grace or not.
	_ = m.Revoke(ctx, tok)
	_, oldErr := m.Validate(ctx, old)
	fmt.Println("old token after logout:", oldErr)
	// Output:
	// new session ID: true same absolute end: true
	// old token serves: true second rotation agrees: true
	// old token after logout: tokens: invalid token
}
