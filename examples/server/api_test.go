package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// twoTo53 is where JavaScript numbers stop holding every integer.
const twoTo53 = 1 << 53

// checkID fails unless s is the decimal string of a snowflake above 2^53
// and returns it.
func checkID(t *testing.T, what, s string) idtype.ID {
	t.Helper()
	id, err := idtype.Parse(s)
	if err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
	if id <= twoTo53 {
		t.Fatalf("%s %s is not above 2^53", what, s)
	}
	return id
}

func TestAPI(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { testAPI(t, b) })
	}
}

// testAPI runs every endpoint, with good and bad input, on one backend.
func testAPI(t *testing.T, b backend) {
	testenv.Deadline(t, 3*time.Minute)
	app, srv := startApp(t, b)
	aliceID, alice := signupLogin(t, srv, "alice@example.com", goodPassword)
	_, bob := signupLogin(t, srv, "bob@example.com", otherPassword)
	r := call(t, srv, "POST", "/api/posts", alice, `{"title":"first","body":"hello"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create post: %d %s", r.status, r.body)
	}
	var post postJSON
	r.json(t, &post)
	var bobSessions struct{ Current string }
	call(t, srv, "GET", "/api/sessions", bob, "").json(t, &bobSessions)

	// The key in JSON is the key in the database, exactly.
	var row Post
	if err := app.db.Take(&row, "id = ?", post.ID).Error; err != nil {
		t.Fatalf("post %s is not in the database: %v", post.ID, err)
	}
	if row.ID != post.ID || row.AuthorID.String() != aliceID || row.Title != "first" {
		t.Fatalf("database row %+v, API %+v, author %s", row, post, aliceID)
	}

	seeded := seedPost(t, app, aliceID, "seeded")

	bigBody := `{"title":"` + strings.Repeat("x", maxBody) + `"}`
	tests := []struct {
		name         string
		method, path string
		token, body  string
		contentType  string // of the body; "" for application/json, "-" for none
		status       int
		errContains  string // in the JSON error; "" for none expected
		challenge    string // WWW-Authenticate expected
		check        func(t *testing.T, r response)
	}{
		// signup: one answer whether the email is new or taken
		{name: "signup", method: "POST", path: "/api/signup", body: `{"email":"Carol@Example.com","password":"` + goodPassword + `","name":" Carol "}`,
			status: 202, check: checkAccepted},
		{name: "signup taken", method: "POST", path: "/api/signup", body: `{"email":"alice@example.com","password":"` + otherPassword + `","name":"Mallory"}`,
			status: 202, check: checkAccepted},
		{name: "signup taken other case", method: "POST", path: "/api/signup", body: `{"email":" ALICE@example.com ","password":"` + otherPassword + `","name":"Mallory"}`,
			status: 202, check: checkAccepted},
		{name: "signup JSON with charset", method: "POST", path: "/api/signup", contentType: "application/json; charset=UTF-8",
			body: `{"email":"charset@example.com","password":"` + goodPassword + `","name":"C"}`, status: 202},
		{name: "signup text/plain", method: "POST", path: "/api/signup", contentType: "text/plain",
			body: `{"email":"d@example.com","password":"` + goodPassword + `","name":"D"}`, status: 415, errContains: "text/plain"},
		{name: "signup form", method: "POST", path: "/api/signup", contentType: "application/x-www-form-urlencoded",
			body: `email=d@example.com`, status: 415, errContains: "not JSON"},
		{name: "signup no Content-Type", method: "POST", path: "/api/signup", contentType: "-",
			body: `{"email":"d@example.com","password":"` + goodPassword + `","name":"D"}`, status: 415, errContains: "no Content-Type"},
		{name: "signup JSON in latin1", method: "POST", path: "/api/signup", contentType: "application/json; charset=latin1",
			body: `{"email":"d@example.com","password":"` + goodPassword + `","name":"D"}`, status: 415},
		{name: "signup multipart", method: "POST", path: "/api/signup", contentType: "multipart/form-data; boundary=x",
			body: "--x--", status: 415},
		{name: "signup no body", method: "POST", path: "/api/signup", status: 400, errContains: "empty"},
		{name: "signup not JSON", method: "POST", path: "/api/signup", body: `email=a@b.c`, status: 400, errContains: "not a JSON object"},
		{name: "signup JSON array", method: "POST", path: "/api/signup", body: `[1,2]`, status: 400},
		{name: "signup truncated", method: "POST", path: "/api/signup", body: `{"email":"d@example.com",`, status: 400},
		{name: "signup two values", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"d-password"} {}`,
			status: 400, errContains: "more than one"},
		{name: "signup unknown field", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"d-password","admin":true}`,
			status: 400, errContains: `"admin"`},
		{name: "signup device", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"d-password","device":"x"}`,
			status: 400, errContains: `"device"`},
		{name: "signup email a number", method: "POST", path: "/api/signup", body: `{"email":5,"password":"d-password"}`,
			status: 400, errContains: `"email"`},
		{name: "signup no email", method: "POST", path: "/api/signup", body: `{"password":"d-password"}`, status: 400, errContains: "email is required"},
		{name: "signup bad email", method: "POST", path: "/api/signup", body: `{"email":"not-an-address","password":"d-password"}`,
			status: 400, errContains: "not an address"},
		{name: "signup email with name", method: "POST", path: "/api/signup", body: `{"email":"D <d@example.com>","password":"d-password"}`,
			status: 400, errContains: "not an address"},
		{name: "signup long email", method: "POST", path: "/api/signup", body: `{"email":"` + strings.Repeat("d", 250) + `@example.com","password":"d-password"}`,
			status: 400, errContains: "longer"},
		{name: "signup no password", method: "POST", path: "/api/signup", body: `{"email":"d@example.com"}`, status: 400, errContains: "password is required"},
		{name: "signup short password", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"1234567"}`,
			status: 400, errContains: "shorter"},
		{name: "signup NUL in password", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"abc\u0000defgh"}`,
			status: 400, errContains: "NUL"},
		{name: "signup no name", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"` + goodPassword + `"}`,
			status: 400, errContains: "name is required"},
		{name: "signup blank name", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"` + goodPassword + `","name":"  "}`,
			status: 400, errContains: "name is required"},
		{name: "signup long name", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"` + goodPassword + `","name":"` + strings.Repeat("n", maxName+1) + `"}`,
			status: 400, errContains: "name is longer"},
		{name: "signup name with newline", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"` + goodPassword + `","name":"a\nb"}`,
			status: 400, errContains: "control character"},
		{name: "signup common password", method: "POST", path: "/api/signup", body: `{"email":"d@example.com","password":"12345678","name":"D"}`,
			status: 400, errContains: "too easy to guess"},
		{name: "signup password is the email", method: "POST", path: "/api/signup", body: `{"email":"dora@example.com","password":"Dora@Example.com","name":"D"}`,
			status: 400, errContains: "must not contain your email"},
		{name: "signup huge body", method: "POST", path: "/api/signup", body: bigBody, status: 413, errContains: "larger"},

		// login
		{name: "login", method: "POST", path: "/api/login", body: `{"email":"ALICE@example.com","password":"` + goodPassword + `","device":"test"}`,
			status: 200, check: func(t *testing.T, r response) {
				var l struct {
					Token   string
					Session struct {
						ID     string
						UserID string `json:"user_id"`
						Device string
					}
				}
				r.json(t, &l)
				checkID(t, "session id", l.Session.ID)
				if !strings.HasPrefix(l.Token, "snk_") || l.Session.UserID != aliceID || l.Session.Device != "test" {
					t.Errorf("login answer %s", r.body)
				}
				if strings.Contains(l.Token, aliceID) {
					t.Errorf("token %s holds the user ID %s", l.Token, aliceID)
				}
			}},
		{name: "login wrong password", method: "POST", path: "/api/login", body: `{"email":"alice@example.com","password":"` + otherPassword + `"}`,
			status: 401, errContains: "wrong email or password"},
		{name: "login unknown email", method: "POST", path: "/api/login", body: `{"email":"nobody@example.com","password":"` + goodPassword + `"}`,
			status: 401, errContains: "wrong email or password"},
		{name: "login bad JSON", method: "POST", path: "/api/login", body: `{`, status: 400},
		{name: "login text/plain", method: "POST", path: "/api/login", contentType: "text/plain",
			body: `{"email":"alice@example.com","password":"` + goodPassword + `"}`, status: 415},
		{name: "login with a name", method: "POST", path: "/api/login", body: `{"email":"alice@example.com","password":"` + goodPassword + `","name":"x"}`,
			status: 400, errContains: `"name"`},
		{name: "post text/plain", method: "POST", path: "/api/posts", token: alice, contentType: "text/plain", body: `{"title":"t"}`, status: 415},
		{name: "login long device", method: "POST", path: "/api/login", body: `{"email":"alice@example.com","password":"` + goodPassword + `","device":"` + strings.Repeat("d", 101) + `"}`,
			status: 400, errContains: "device"},

		// authentication, as the tokens middleware answers
		{name: "me without token", method: "GET", path: "/api/me", status: 401, challenge: `Bearer realm="api"`},
		{name: "me with junk token", method: "GET", path: "/api/me", token: "snk_junk", status: 401, challenge: `Bearer realm="api", error="invalid_token"`},
		{name: "me with forged token", method: "GET", path: "/api/me", token: alice[:len(alice)-3] + "AAA", status: 401, challenge: `Bearer realm="api", error="invalid_token"`},
		{name: "me with bad header", method: "GET", path: "/api/me", token: "a b", status: 400, challenge: `Bearer realm="api", error="invalid_request"`},
		{name: "posts without token", method: "POST", path: "/api/posts", body: `{"title":"t"}`, status: 401, challenge: `Bearer realm="api"`},

		// me
		{name: "me", method: "GET", path: "/api/me", token: alice, status: 200, check: func(t *testing.T, r response) {
			var me struct {
				ID, Email, Name string
				Session         struct{ ID string }
			}
			r.json(t, &me)
			if me.ID != aliceID || me.Email != "alice@example.com" || me.Name != "The alice" || me.Session.ID == "" {
				t.Errorf("me: %s", r.body)
			}
		}},

		// posts
		{name: "create post", method: "POST", path: "/api/posts", token: bob, body: `{"title":"  by bob  ","body":"text"}`,
			status: 201, check: func(t *testing.T, r response) {
				var p postJSON
				r.json(t, &p)
				checkID(t, "post id", p.ID.String())
				if p.Title != "by bob" || p.AuthorName != "The bob" || !p.CreatedAt.Equal(p.ID.Time()) {
					t.Errorf("post: %s", r.body)
				}
			}},
		{name: "create post no title", method: "POST", path: "/api/posts", token: bob, body: `{"title":"  ","body":"text"}`,
			status: 400, errContains: "title is required"},
		{name: "create post long title", method: "POST", path: "/api/posts", token: bob, body: `{"title":"` + strings.Repeat("é", maxTitle+1) + `"}`,
			status: 400, errContains: "title is longer"},
		{name: "create post long body", method: "POST", path: "/api/posts", token: bob, body: `{"title":"t","body":"` + strings.Repeat("b", maxPostBody+1) + `"}`,
			status: 400, errContains: "body is longer"},
		{name: "create post NUL", method: "POST", path: "/api/posts", token: bob, body: `{"title":"t","body":"a\u0000b"}`,
			status: 400, errContains: "NUL"},
		{name: "create post title a number", method: "POST", path: "/api/posts", token: bob, body: `{"title":1}`,
			status: 400, errContains: `"title"`},
		{name: "list posts", method: "GET", path: "/api/posts", token: bob, status: 200, check: func(t *testing.T, r response) {
			var page struct {
				Posts []postJSON
				Next  *string
			}
			r.json(t, &page)
			if len(page.Posts) == 0 || page.Next != nil {
				t.Errorf("list: %s", r.body)
			}
			// Any signed-in user reads the list: it shows authors by
			// name, never their email.
			if strings.Contains(string(r.body), "@example.com") || strings.Contains(string(r.body), "email") {
				t.Errorf("the post list shows an email: %s", r.body)
			}
			if !slices.ContainsFunc(page.Posts, func(p postJSON) bool { return p.ID == post.ID }) {
				t.Errorf("list lacks post %s: %s", post.ID, r.body)
			}
		}},
		{name: "list posts before junk", method: "GET", path: "/api/posts?before=abc", token: bob, status: 400, errContains: "before"},
		{name: "list posts before negative", method: "GET", path: "/api/posts?before=-5", token: bob, status: 400, errContains: "before"},
		{name: "list posts before overflow", method: "GET", path: "/api/posts?before=9223372036854775808", token: bob, status: 400, errContains: "before"},
		{name: "list posts before float", method: "GET", path: "/api/posts?before=1e18", token: bob, status: 400, errContains: "before"},
		{name: "list posts limit 0", method: "GET", path: "/api/posts?limit=0", token: bob, status: 400, errContains: "limit"},
		{name: "list posts limit 101", method: "GET", path: "/api/posts?limit=101", token: bob, status: 400, errContains: "limit"},
		{name: "list posts limit junk", method: "GET", path: "/api/posts?limit=ten", token: bob, status: 400, errContains: "limit"},
		{name: "get post", method: "GET", path: "/api/posts/" + post.ID.String(), token: bob, status: 200, check: func(t *testing.T, r response) {
			var p postJSON
			r.json(t, &p)
			if p != post {
				t.Errorf("got %+v, want %+v", p, post)
			}
		}},
		{name: "get unknown post", method: "GET", path: "/api/posts/" + (post.ID + 1).String(), token: bob, status: 404, errContains: "no post"},
		{name: "get post junk id", method: "GET", path: "/api/posts/abc", token: bob, status: 400, errContains: "id"},
		{name: "get post id 0", method: "GET", path: "/api/posts/0", token: bob, status: 400, errContains: "0"},
		{name: "get post id overflow", method: "GET", path: "/api/posts/99999999999999999999", token: bob, status: 400, errContains: "id"},
		{name: "get seeded post", method: "GET", path: "/api/posts/" + seeded.String(), token: bob, status: 200},
		{name: "get post id as rounded by JS", method: "GET", path: "/api/posts/" + jsRounded(seeded), token: bob, status: 404},

		// sessions
		{name: "list sessions", method: "GET", path: "/api/sessions", token: bob, status: 200, check: func(t *testing.T, r response) {
			var l struct {
				Sessions []struct {
					ID      string
					Current bool
				}
				Current string
			}
			r.json(t, &l)
			if len(l.Sessions) != 1 || !l.Sessions[0].Current || l.Sessions[0].ID != l.Current || l.Current != bobSessions.Current {
				t.Errorf("sessions: %s", r.body)
			}
		}},
		{name: "delete other user's session", method: "DELETE", path: "/api/sessions/" + bobSessions.Current, token: alice, status: 404, errContains: "no live session"},
		{name: "delete unknown session", method: "DELETE", path: "/api/sessions/12345", token: alice, status: 404},
		{name: "delete session junk id", method: "DELETE", path: "/api/sessions/x1", token: alice, status: 400},

		// the mux
		{name: "unknown endpoint", method: "GET", path: "/api/nothing", token: alice, status: 404, errContains: "no endpoint"},
		{name: "wrong method", method: "PUT", path: "/api/posts", token: alice, status: 405, errContains: "not allowed"},
		{name: "page", method: "GET", path: "/", status: 200, check: func(t *testing.T, r response) {
			if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || r.header.Get("Content-Security-Policy") == "" ||
				!strings.Contains(string(r.body), "/app.js") {
				t.Errorf("page: %v %s", r.header, r.body)
			}
		}},
		{name: "script", method: "GET", path: "/app.js", status: 200, check: func(t *testing.T, r response) {
			if !strings.Contains(string(r.body), `from "/snowkey.js"`) {
				t.Errorf("app.js does not import the snowkey package")
			}
		}},
		{name: "snowkey package", method: "GET", path: "/snowkey.js", status: 200, check: func(t *testing.T, r response) {
			// A module script runs only when served as JavaScript.
			if !strings.HasPrefix(r.header.Get("Content-Type"), "text/javascript") || !strings.Contains(string(r.body), "function parseID(") {
				t.Errorf("snowkey.js: %v %.200s", r.header, r.body)
			}
		}},
		{name: "no other files", method: "GET", path: "/app.go", status: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct := "application/json"
			switch tc.contentType {
			case "":
			case "-":
				ct = ""
			default:
				ct = tc.contentType
			}
			r := callType(t, srv, tc.method, tc.path, tc.token, tc.body, ct)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			if got := r.header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if tc.errContains != "" {
				if msg := r.errorMsg(t); !strings.Contains(msg, tc.errContains) {
					t.Errorf("error %q does not contain %q", msg, tc.errContains)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}

	// A signup for a taken email changed nothing: the owner's password
	// still works, the other one does not.
	if r := call(t, srv, "POST", "/api/login", "", `{"email":"alice@example.com","password":"`+otherPassword+`"}`); r.status != 401 {
		t.Errorf("login with the password of the second signup: %d, want 401", r.status)
	}
	if r := call(t, srv, "POST", "/api/login", "", `{"email":"alice@example.com","password":"`+goodPassword+`"}`); r.status != 200 {
		t.Errorf("login of the owner after the second signup: %d, want 200", r.status)
	}
	// A sign-up makes no account until its link is followed: carol has
	// none, and her mail holds the link; alice's two sign-ups only told
	// her, without a link.
	var users []string
	if err := app.db.Model(&User{}).Where("email IN ?", []string{"alice@example.com", "carol@example.com"}).Pluck("email", &users).Error; err != nil ||
		!slices.Equal(users, []string{"alice@example.com"}) {
		t.Errorf("accounts of alice and carol: %v (%v), want alice's alone", users, err)
	}
	mails, _ := app.outbox.messages()
	var toAlice, linksToAlice int
	for _, m := range mails {
		if m.To == "alice@example.com" {
			toAlice++
			if verifyTokenRE.MatchString(m.Body) {
				linksToAlice++
			}
		}
	}
	if toAlice != 3 || linksToAlice != 1 {
		t.Errorf("%d mails to alice, %d with a link; want her own sign-up's link and two notices", toAlice, linksToAlice)
	}
	outboxToken(t, srv.URL, "carol@example.com")

	if app.db.Name() == "postgres" {
		t.Run("row inserted by SQL", func(t *testing.T) { testSQLInsert(t, app, srv, aliceID, bob) })
	}
	t.Run("sessions", func(t *testing.T) { testSessions(t, srv) })
	t.Run("pagination", func(t *testing.T) { testPagination(t, srv) })
}

// checkAccepted checks a signup's answer: 202 and the one body every
// accepted signup gets, new email or not.
func checkAccepted(t *testing.T, r response) {
	t.Helper()
	if want := mustJSON(t, signupAccepted); string(r.body) != want {
		t.Errorf("signup answered %s, want %s", r.body, want)
	}
}

// seedPost writes a post straight to the database, as another service
// might, with an ID that a JavaScript number cannot hold: made an hour ago
// on the app's worker (its generator never goes back there) with a
// sequence whose low bits are set. (The generator's IDs at low traffic
// have sequence 0 and, being multiples of 4096, happen to survive a
// float64: the rounding bites only under load.)
func seedPost(t *testing.T, app *App, authorID, title string) idtype.ID {
	t.Helper()
	id, err := app.gen.Layout().Compose(time.Now().Add(-time.Hour), app.gen.Worker(), 777)
	if err != nil {
		t.Fatal(err)
	}
	if jsRounded(id) == id.String() {
		t.Fatalf("seeded ID %s survives a float64", id)
	}
	author, err := idtype.Parse(authorID)
	if err != nil {
		t.Fatal(err)
	}
	p := Post{ID: id, AuthorID: author, Title: title, Body: "ID " + id.String()}
	if err := app.db.Create(&p).Error; err != nil {
		t.Fatalf("seed post: %v", err)
	}
	return id
}

// jsRounded is id as JavaScript's Number would hold it: the nearest
// double, printed as an integer.
func jsRounded(id idtype.ID) string {
	f, _ := new(big.Float).SetFloat64(float64(id)).Int(nil)
	return f.String()
}

// testSQLInsert inserts a post with plain SQL, as a script or another
// service would: the column's DEFAULT snowflake_id() gives it a key on
// the reserved worker, which the API serves like any other.
func testSQLInsert(t *testing.T, app *App, srv *httptest.Server, authorID, token string) {
	var id idtype.ID
	err := app.db.Raw("INSERT INTO posts (author_id, title, body) VALUES (?, 'by SQL', '') RETURNING id", authorID).Scan(&id).Error
	if err != nil {
		t.Fatal(err)
	}
	checkID(t, "snowflake_id()", id.String())
	if w := idtype.DefaultLayout.Decode(id).Worker; w != 1023 {
		t.Errorf("snowflake_id() gave worker %d, want the reserved 1023", w)
	}
	if w := app.gen.Worker(); w == 1023 {
		t.Errorf("the app leased the reserved worker 1023")
	}
	r := call(t, srv, "GET", "/api/posts/"+id.String(), token, "")
	var p postJSON
	r.json(t, &p)
	if r.status != 200 || p.ID != id || p.Title != "by SQL" {
		t.Errorf("GET the SQL-inserted post: %d %s", r.status, r.body)
	}
}

// testSessions logs one user in three times and logs the sessions out one
// way after another.
func testSessions(t *testing.T, srv *httptest.Server) {
	// The verification's session ends; the four logins are the devices.
	_, first := signupLogin(t, srv, "dave@example.com", goodPassword)
	if r := call(t, srv, "POST", "/api/logout", first, ""); r.status != 204 {
		t.Fatalf("logout of the verification's session: %d %s", r.status, r.body)
	}
	var toks []string
	var sids []string
	for i := range 4 {
		r := call(t, srv, "POST", "/api/login", "", fmt.Sprintf(`{"email":"dave@example.com","password":"%s","device":"d%d"}`, goodPassword, i))
		var l struct {
			Token   string
			Session struct{ ID string }
		}
		r.json(t, &l)
		toks, sids = append(toks, l.Token), append(sids, l.Session.ID)
	}
	var list struct {
		Sessions []struct{ ID, Device string }
	}
	call(t, srv, "GET", "/api/sessions", toks[0], "").json(t, &list)
	if len(list.Sessions) != 4 || list.Sessions[0].ID != sids[3] || list.Sessions[3].Device != "d0" {
		t.Fatalf("sessions, newest first: %+v, want IDs %v", list.Sessions, sids)
	}

	// Log device 1 out from device 0.
	if r := call(t, srv, "DELETE", "/api/sessions/"+sids[1], toks[0], ""); r.status != 204 {
		t.Fatalf("delete session: %d %s", r.status, r.body)
	}
	if r := call(t, srv, "GET", "/api/me", toks[1], ""); r.status != 401 {
		t.Fatalf("deleted session's token: %d, want 401", r.status)
	}
	if r := call(t, srv, "DELETE", "/api/sessions/"+sids[1], toks[0], ""); r.status != 404 {
		t.Fatalf("delete it again: %d, want 404", r.status)
	}
	// Device 2 logs itself out.
	if r := call(t, srv, "POST", "/api/logout", toks[2], ""); r.status != 204 {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	if r := call(t, srv, "GET", "/api/me", toks[2], ""); r.status != 401 {
		t.Fatalf("after logout: %d, want 401", r.status)
	}
	if r := call(t, srv, "GET", "/api/me", toks[0], ""); r.status != 200 {
		t.Fatalf("another device after logout: %d, want 200", r.status)
	}
	// Device 3 logs out everywhere: 0 and 3 are left.
	r := call(t, srv, "POST", "/api/logout-all", toks[3], "")
	var n struct{ Revoked int }
	r.json(t, &n)
	if r.status != 200 || n.Revoked != 2 {
		t.Fatalf("logout-all: %d %s, want 200 and 2 revoked", r.status, r.body)
	}
	for i, tok := range toks {
		if r := call(t, srv, "GET", "/api/me", tok, ""); r.status != 401 {
			t.Errorf("token %d after logout-all: %d, want 401", i, r.status)
		}
	}
}

// testPagination pages through posts with ?before= and checks the order
// and that nothing repeats or goes missing.
func testPagination(t *testing.T, srv *httptest.Server) {
	_, tok := signupLogin(t, srv, "erin@example.com", goodPassword)
	before := len(pageAll(t, srv, tok))
	var made []string
	for i := range 16 {
		r := call(t, srv, "POST", "/api/posts", tok, fmt.Sprintf(`{"title":"post %d"}`, i))
		var p struct{ ID string }
		r.json(t, &p)
		made = append(made, p.ID)
	}
	all := pageAll(t, srv, tok)
	if len(all) != before+16 {
		t.Fatalf("paged %d posts, want %d", len(all), before+16)
	}
	ids := make([]idtype.ID, len(all))
	for i, s := range all {
		ids[i] = checkID(t, "post id", s)
		if i > 0 && ids[i] >= ids[i-1] {
			t.Fatalf("posts not newest first at %d: %s after %s", i, s, all[i-1])
		}
	}
	slices.Reverse(made)
	if !slices.Equal(all[:16], made) {
		t.Fatalf("newest 16 %v, want those just made %v", all[:16], made)
	}
}

// pageAll reads every post, 7 a page, and returns their IDs in order.
func pageAll(t *testing.T, srv *httptest.Server, tok string) []string {
	t.Helper()
	var all []string
	for next := ""; ; {
		path := "/api/posts?limit=7"
		if next != "" {
			path += "&before=" + next
		}
		var page struct {
			Posts []struct{ ID string }
			Next  *string
		}
		call(t, srv, "GET", path, tok, "").json(t, &page)
		for _, p := range page.Posts {
			all = append(all, p.ID)
		}
		if page.Next == nil {
			return all
		}
		if len(page.Posts) != 7 || *page.Next != all[len(all)-1] {
			t.Fatalf("page of %d posts with next %s; want 7 and the last ID %s", len(page.Posts), *page.Next, all[len(all)-1])
		}
		next = *page.Next
	}
}

// TestCrossOriginSignup is a cross-site request forgery: a page on another
// origin posts a signup as text/plain, which a browser sends without a
// CORS preflight. The server refuses it with 415 and mails nothing; in
// the control run, where every body reaches the App as JSON (see
// anyTypeAsJSON), the sign-up goes through and its mail goes out.
func TestCrossOriginSignup(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "checked", true: "control"}[control], func(t *testing.T) {
			cfg := Config{Throttle: generous()}
			var front func(*App) http.Handler
			if control {
				front = anyTypeAsJSON
			}
			app, srv := startAppBehind(t, cfg, front)
			req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/api/signup",
				strings.NewReader(`{"email":"drive-by@example.com","password":"`+goodPassword+`","name":"X"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
			req.Header.Set("Origin", "https://evil.example")
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			mails, _ := app.outbox.messages()
			switch {
			case !control && (res.StatusCode != 415 || len(mails) != 0):
				t.Errorf("text/plain signup from another origin: %d, %d mails sent; want 415 and none", res.StatusCode, len(mails))
			case control && (res.StatusCode != 202 || len(mails) != 1):
				t.Errorf("control: %d, %d mails; want the sign-up taken and mailed, as before the check", res.StatusCode, len(mails))
			}
		})
	}
}

// anyTypeAsJSON serves the App's Handler, but shows it every request
// that has a body as application/json, as a server that reads any body
// as JSON would see it: the control of TestCrossOriginSignup.
func anyTypeAsJSON(app *App) http.Handler {
	h := app.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			r = r.Clone(r.Context())
			r.Header.Set("Content-Type", "application/json")
		}
		h.ServeHTTP(w, r)
	})
}

// TestSignupEnumeration is account enumeration and squatting, in two
// requests each: sign up an address with a password of one's own, then log in with it.
// For an address with an account and for a fresh one, every answer must
// be the same, and the fresh address's owner must still be able to sign
// up: an attacker learns nothing and squats nothing. The mail goes
// through a real SMTP server started by the test, from which the owners
// read their links; the defended run sees the attack met (the owner of
// the taken address got a notice, the fresh address a link). Two control
// runs each serve the sign-ups by an older rule, written in the test,
// and the comparison catches each: a sign-up that answers 409 for a
// taken address (revealTaken), and a sign-up that makes a usable account
// at once (signupAtOnce: 202 then 401 for a taken address, 202 then 200,
// the attacker's account, for a fresh one).
func TestSignupEnumeration(t *testing.T) {
	t.Parallel()
	for _, run := range []struct {
		name           string
		front          func(*App) http.Handler
		noVerification bool
	}{
		{name: "verified sign-ups"},
		{name: "control: 409 for a taken address", front: revealTaken},
		{name: "control: no verification", front: signupAtOnce, noVerification: true},
	} {
		t.Run(run.name, func(t *testing.T) {
			testenv.Deadline(t, 2*time.Minute)
			sink := startSMTP(t, "", "", nil)
			mailer, err := NewSMTPMailer("smtp://"+sink.addr, "noreply@example.test")
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Throttle: generous(), Mailer: mailer}
			app, srv := startAppBehind(t, cfg, run.front)
			verify := func(email, password string, want int) {
				t.Helper()
				r := call(t, srv, "POST", "/api/verify", "", mustJSON(t, map[string]string{"token": sink.token(t, email), "password": password}))
				if r.status != want {
					t.Fatalf("verify %s: %d %s, want %d", email, r.status, r.body, want)
				}
			}
			owner := `{"email":"owner@example.com","password":"` + goodPassword + `","name":"Owner"}`
			if r := call(t, srv, "POST", "/api/signup", "", owner); r.status != 202 {
				t.Fatalf("the owner's sign-up: %d %s", r.status, r.body)
			}
			if !run.noVerification {
				verify("owner@example.com", goodPassword, 200)
			}

			attack := func(email string) (signup, login response) {
				signup = call(t, srv, "POST", "/api/signup", "", `{"email":"`+email+`","password":"`+attackerPassword+`","name":"Mallory"}`)
				login = call(t, srv, "POST", "/api/login", "", `{"email":"`+email+`","password":"`+attackerPassword+`"}`)
				return signup, login
			}
			mailed, _ := sink.received()
			takenSignup, takenLogin := attack("Owner@Example.com")
			freshSignup, freshLogin := attack("fresh@example.com")
			same := func(a, b response) bool { return a.status == b.status && bytes.Equal(a.body, b.body) }
			if run.front != nil {
				if same(takenSignup, freshSignup) && same(takenLogin, freshLogin) {
					t.Errorf("control: a taken and a fresh address answer alike (%d %d); the comparison cannot see the difference",
						takenSignup.status, takenLogin.status)
				}
				return
			}
			if !same(takenSignup, freshSignup) || takenSignup.status != 202 {
				t.Errorf("sign-ups: taken %d %s, fresh %d %s; want one 202", takenSignup.status, takenSignup.body, freshSignup.status, freshSignup.body)
			}
			if !same(takenLogin, freshLogin) || takenLogin.status != 401 {
				t.Errorf("logins after them: taken %d %s, fresh %d %s; want one 401", takenLogin.status, takenLogin.body, freshLogin.status, freshLogin.body)
			}
			// The attack met the defence: the server took both sign-ups and
			// mailed each address, a notice to the owner and a link to the
			// fresh address, which the attacker does not read.
			all, _ := sink.received()
			if sent := all[len(mailed):]; len(sent) != 2 ||
				sent[0].to != "owner@example.com" || verifyTokenRE.MatchString(sent[0].body) || !strings.Contains(sent[0].body, "has an account already") ||
				sent[1].to != "fresh@example.com" || !verifyTokenRE.MatchString(sent[1].body) {
				t.Errorf("the attack's sign-ups mailed %d messages: %+v; want a notice to the owner and a link to the fresh address", len(sent), sent)
			}
			// The fresh address's owner signs up with a password of their
			// own and gets in; the attacker's password never works there,
			// not even through the link of the attacker's own sign-up,
			// which went to the owner.
			attackerLink := sink.token(t, "fresh@example.com")
			if r := call(t, srv, "POST", "/api/signup", "", `{"email":"fresh@example.com","password":"`+goodPassword+`","name":"Fresh"}`); r.status != 202 {
				t.Fatalf("the real owner's sign-up: %d %s", r.status, r.body)
			}
			if r := call(t, srv, "POST", "/api/verify", "", mustJSON(t, map[string]string{"token": attackerLink, "password": goodPassword})); r.status != 401 {
				t.Errorf("the owner following the attacker's link with their own password: %d %s, want 401", r.status, r.body)
			}
			verify("fresh@example.com", goodPassword, 200)
			if r := call(t, srv, "POST", "/api/login", "", `{"email":"fresh@example.com","password":"`+attackerPassword+`"}`); r.status != 401 {
				t.Errorf("the attacker's password on the verified address: %d, want 401", r.status)
			}
			var n int64
			app.db.Model(&User{}).Where("email = ?", "fresh@example.com").Count(&n)
			if n != 1 {
				t.Errorf("%d accounts for fresh@example.com, want 1", n)
			}
		})
	}
}

// signupWith serves the App's Handler, but gives each POST /api/signup
// to rule first, with its credentials checked and normalized as the
// App's sign-up does: a request that rule did not answer goes on to the
// App. It builds the controls of TestSignupEnumeration.
func signupWith(app *App, rule func(http.ResponseWriter, *http.Request, credentials) (answered bool, e *apiError)) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", app.Handler())
	mux.Handle("POST /api/signup", apiHandler(func(w http.ResponseWriter, r *http.Request) *apiError {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return badRequest("cannot read the request body: %v", err)
		}
		var in credentials
		if json.Unmarshal(body, &in) != nil || in.check(true) != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			app.Handler().ServeHTTP(w, r)
			return nil
		}
		if answered, e := rule(w, r, in); answered || e != nil {
			return e
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		app.Handler().ServeHTTP(w, r)
		return nil
	}))
	return mux
}

// revealTaken is a sign-up that answers 409 for an address with an
// account, as sign-ups did before they mailed its owner instead.
func revealTaken(app *App) http.Handler {
	return signupWith(app, func(w http.ResponseWriter, r *http.Request, in credentials) (bool, *apiError) {
		var taken int64
		if err := app.db.WithContext(r.Context()).Model(&User{}).Where("email = ?", in.Email).Count(&taken).Error; err != nil {
			return true, app.internal(r.Context(), "signup: find user", err)
		}
		if taken > 0 {
			return true, &apiError{status: http.StatusConflict, msg: "email " + in.Email + " is already registered"}
		}
		return false, nil
	})
}

// signupAtOnce is a sign-up without verification, as sign-ups were
// before they mailed a link: the account is usable at once, and a taken
// address is answered the same but changes nothing.
func signupAtOnce(app *App) http.Handler {
	return signupWith(app, func(w http.ResponseWriter, r *http.Request, in credentials) (bool, *apiError) {
		hash, e := app.newPasswordHash(r.Context(), in.Password, in.Email, in.Name)
		if e != nil {
			return true, e
		}
		u := User{Email: in.Email, Name: in.Name, PasswordHash: hash}
		if err := app.create(r.Context(), &u); err != nil && !errors.Is(err, gorm.ErrDuplicatedKey) {
			return true, app.internal(r.Context(), "signup: create user", err)
		}
		writeJSON(w, http.StatusAccepted, signupAccepted)
		return true, nil
	})
}

// attackerPassword is a strong password of somebody who is not the
// address's owner.
const attackerPassword = "quartz-wombat-ledger-58"
