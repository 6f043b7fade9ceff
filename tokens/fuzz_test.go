package tokens

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func FuzzParseToken(f *testing.F) {
	good := (&token{session: 1863486340915077120, tag: 517, secret: [32]byte{1, 2, 3}}).format("snk")
	for _, s := range []string{good, "", "snk_", good[:40], good + "x", "snk_" + strings.Repeat("z", bodyLen),
		"snk_" + strings.Repeat("0", bodyLen), strings.Replace(good, "_", "-", 1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, ok := parseToken("snk", s)
		if !ok {
			if tok != (token{}) {
				t.Fatalf("parseToken(%q) failed but returned %+v", s, tok)
			}
			return
		}
		// A token has exactly one spelling.
		if again := tok.format("snk"); again != s {
			t.Fatalf("parseToken(%q) = %+v, which formats as %q", s, tok, again)
		}
		if tok.session <= 0 || tok.tag >= numSlotTags {
			t.Fatalf("parseToken(%q) accepted %+v", s, tok)
		}
	})
}

func FuzzParseCredentials(f *testing.F) {
	for _, s := range [][2]string{{"Bearer abc", ""}, {"bearer  a/b+c==", ""}, {"Basic x", "tok"}, {"", " tok "},
		{"Bearer", ""}, {"Bearer a b", ""}, {"Bearer \xff", ""}} {
		f.Add(s[0], s[1], true, true)
	}
	f.Fuzz(func(t *testing.T, auth, custom string, hasAuth, hasCustom bool) {
		var a, c []string
		if hasAuth {
			a = []string{auth}
		}
		if hasCustom {
			c = []string{custom}
		}
		tok, res := parseCredentials(a, c)
		switch res {
		case credToken:
			if !isB64Token(tok) {
				t.Fatalf("parseCredentials(%q, %q) = %q, not a b64token", a, c, tok)
			}
			if !strings.Contains(auth, tok) && !strings.Contains(custom, tok) {
				t.Fatalf("parseCredentials(%q, %q) = %q, found in neither", a, c, tok)
			}
		case credNone, credMalformed:
			if tok != "" {
				t.Fatalf("parseCredentials(%q, %q) = %q with result %d", a, c, tok, res)
			}
		default:
			t.Fatalf("result %d", res)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add((&record{user: 5}).encode())
	f.Add((&record{user: 5, login: 99, meta: Metadata{Device: "d", UserAgent: "u", IP: "i"}}).encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(string(b), true)
		if err != nil {
			return
		}
		if r.user <= 0 {
			t.Fatalf("decoded a record of user %d", r.user)
		}
		// What decodes re-encodes to a value that decodes the same.
		again, err := decodeRecord(string(r.encode()), true)
		if err != nil || again != r {
			t.Fatalf("re-decoded %+v, %v; want %+v", again, err, r)
		}
	})
}

func FuzzDecodeStub(f *testing.F) {
	f.Add(append([]byte{0x80, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9}, make([]byte, saltLen)...))
	f.Add((&record{user: 5}).encode()[digestLen:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, ok := decodeStub(string(b))
		if !ok {
			return
		}
		if st.user <= 0 || st.next <= 0 || !isStub(string(b)) || len(b) != stubLen-digestLen {
			t.Fatalf("decoded %+v from %x", st, b)
		}
		// No record reads as a stub, nor a stub as a record.
		if _, err := decodeRecord(strings.Repeat("d", digestLen)+string(b), true); err == nil {
			t.Fatalf("stub %x decodes as a record", b)
		}
	})
}

// FuzzClearCopies: whatever the Host and path, the deletions are cookies
// a browser takes (valid Set-Cookie lines that delete the name, Secure),
// a bounded number of them, each for a Path that matches the request's.
func FuzzClearCopies(f *testing.F) {
	for _, s := range [][2]string{{"app.example.com", "/api/posts"}, {"127.0.0.1:8080", "/"}, {"[::1]:80", "/a//b/"},
		{"a.b.c.d.e.f.g.h.example", strings.Repeat("/x", 30)}, {"", ""}, {"bad host;", "/a;b"}, {"localhost", "/\x00"}} {
		f.Add(s[0], s[1])
	}
	m := &Manager{}
	c := &Cookies{m: m}
	var err error
	if c.opts, err = (CookieOptions{Name: "__Secure-s"}).withDefaults(); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host, path string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host, r.URL.Path = host, path
		w := httptest.NewRecorder()
		c.clearCopies(w, r, true)
		lines := w.Header().Values("Set-Cookie")
		if len(lines) == 0 || len(lines) > 1+(maxCopyDomains+1)*maxCopyPaths {
			t.Fatalf("%d deletions for %q %q", len(lines), host, path)
		}
		for _, l := range lines {
			ck, err := http.ParseSetCookie(l)
			if err != nil || ck.Name != "__Secure-s" || ck.Value != "" || ck.MaxAge >= 0 || !ck.Secure {
				t.Fatalf("deletion %q: %+v, %v", l, ck, err)
			}
			if ck.Path != "/" && !strings.HasPrefix(path, ck.Path) {
				t.Fatalf("deletion %q for request path %q", l, path)
			}
		}
	})
}
