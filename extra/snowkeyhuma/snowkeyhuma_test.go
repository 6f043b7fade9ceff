package snowkeyhuma_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/snowkeyhq/snowkey/extra/snowkeyhuma"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 3*time.Minute))
}

type Post struct {
	ID         idtype.ID      `json:"id"`
	AuthorID   idtype.ID      `json:"author_id"`
	ParentID   sqltype.NullID `json:"parent_id"`
	MentionIDs sqltype.IDs    `json:"mention_ids"`
	Title      string         `json:"title"`
}

type getInput struct {
	ID snowkeyhuma.ParamID `path:"id"`
}

// plainGetInput takes the ID as an idtype.ID, which huma parses as a
// number: the control of ParamID.
type plainGetInput struct {
	ID idtype.ID `path:"id"`
}

type createInput struct {
	Body struct {
		AuthorID   idtype.ID      `json:"author_id"`
		ParentID   sqltype.NullID `json:"parent_id,omitempty" required:"false"`
		MentionIDs sqltype.IDs    `json:"mention_ids,omitempty" required:"false"`
		Title      string         `json:"title"`
	}
}

type postOutput struct {
	Body Post
}

// newAPI serves two operations on posts, with the ID types registered
// by snowkeyhuma.Register or, for a control, not.
func newAPI(t *testing.T, register bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	api := humago.New(mux, huma.DefaultConfig("posts", "1.0.0"))
	if register {
		snowkeyhuma.Register(api.OpenAPI().Components.Schemas)
	}
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		t.Fatal(err)
	}
	posts := map[idtype.ID]Post{}
	huma.Post(api, "/posts", func(ctx context.Context, in *createInput) (*postOutput, error) {
		id, err := gen.Next()
		if err != nil {
			return nil, err
		}
		p := Post{ID: id, AuthorID: in.Body.AuthorID, ParentID: in.Body.ParentID, MentionIDs: in.Body.MentionIDs, Title: in.Body.Title}
		posts[id] = p
		return &postOutput{Body: p}, nil
	})
	huma.Get(api, "/posts/{id}", func(ctx context.Context, in *getInput) (*postOutput, error) {
		p, ok := posts[in.ID.ID]
		if !ok {
			return nil, huma.Error404NotFound("no post " + in.ID.String())
		}
		return &postOutput{Body: p}, nil
	})
	huma.Get(api, "/plain/{id}", func(ctx context.Context, in *plainGetInput) (*postOutput, error) {
		p, ok := posts[in.ID]
		if !ok {
			return nil, huma.Error404NotFound("no post " + in.ID.String())
		}
		return &postOutput{Body: p}, nil
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// schemas returns the OpenAPI document's schemas of the Post response's
// properties and of the id path parameter, and the document's named
// schemas.
func schemas(t *testing.T, ts *httptest.Server) (post, param map[string]any, named map[string]map[string]any) {
	t.Helper()
	status, body := call(t, "GET", ts.URL+"/openapi.json", "")
	if status != 200 {
		t.Fatalf("GET /openapi.json: %d %s", status, body)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string         `json:"name"`
				Schema map[string]any `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Components.Schemas["Post"]["properties"].(map[string]any), doc.Paths["/posts/{id}"]["get"].Parameters[0].Schema, doc.Components.Schemas
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSchemas reads the OpenAPI document huma produces: with Register,
// every ID is a string of digits (a NullID one that may be null, IDs an
// array of them), in bodies and in the path. Its control, without
// Register, sees what a client generator would otherwise be given: a
// NullID as an object of ID and Valid, and no pattern on an ID.
func TestSchemas(t *testing.T) {
	testenv.Deadline(t, time.Minute)
	id := `{"description":"` + snowkeyhuma.Description + `","examples":["1541815603606036480"],"pattern":"^(0|[1-9][0-9]{0,18})$","type":"string"}`
	props, param, _ := schemas(t, newAPI(t, true))
	for field, want := range map[string]string{
		"id":          id,
		"author_id":   id,
		"parent_id":   strings.Replace(id, `"type":"string"`, `"type":["string","null"]`, 1),
		"mention_ids": `{"items":` + id + `,"type":["array","null"]}`,
	} {
		if got := asJSON(props[field]); got != want {
			t.Errorf("Post.%s: %s\nwant %s", field, got, want)
		}
	}
	if got := asJSON(param); got != id {
		t.Errorf("the id parameter: %s\nwant %s", got, id)
	}

	props, _, named := schemas(t, newAPI(t, false))
	if got := asJSON(named["NullID"]); asJSON(props["parent_id"]) != `{"$ref":"#/components/schemas/NullID"}` || !strings.Contains(got, `"Valid"`) ||
		asJSON(props["id"]) != `{"type":"string"}` {
		t.Errorf("control: without Register, parent_id is %s (NullID %s) and id %s; want an object of ID and Valid, and a bare string",
			asJSON(props["parent_id"]), got, asJSON(props["id"]))
	}
}

// TestRequests sends IDs past 2^53 through huma and gets them back
// exact, as strings; what is not an ID's spelling is refused by huma's
// validation against the pattern, before the handler runs.
func TestRequests(t *testing.T) {
	testenv.Deadline(t, time.Minute)
	ts := newAPI(t, true)
	status, body := call(t, "POST", ts.URL+"/posts", `{"author_id":"9007199254740993","parent_id":"9223372036854775807","mention_ids":["1"],"title":"hi"}`)
	var p Post
	if status != 200 || json.Unmarshal([]byte(body), &p) != nil || p.AuthorID != 1<<53+1 {
		t.Fatalf("create: %d %s", status, body)
	}
	for _, want := range []string{`"author_id":"9007199254740993"`, `"parent_id":"9223372036854775807"`, `"mention_ids":["1"]`} {
		if !strings.Contains(body, want) {
			t.Errorf("the answer %s lacks %s", body, want)
		}
	}
	if status, body := call(t, "GET", ts.URL+"/posts/"+p.ID.String(), ""); status != 200 || !strings.Contains(body, `"id":"`+p.ID.String()+`"`) {
		t.Errorf("GET the post: %d %s", status, body)
	}
	if status, body := call(t, "POST", ts.URL+"/posts", `{"author_id":"1","parent_id":null,"title":"null parent"}`); status != 200 || !strings.Contains(body, `"parent_id":null`) {
		t.Errorf("a null parent: %d %s", status, body)
	}
	for _, in := range []string{`9007199254740993`, `"-1"`, `"007"`, `"1.5"`, `"12345678901234567890"`} {
		if status, body := call(t, "POST", ts.URL+"/posts", `{"author_id":`+in+`,"title":"x"}`); status != 422 && status != 400 {
			t.Errorf("author_id %s: %d %s; want it refused", in, status, body)
		}
	}
	// The control of ParamID: an idtype.ID parameter is parsed as a number
	// and fails the string schema, valid as the ID is.
	if status, body := call(t, "GET", ts.URL+"/plain/"+p.ID.String(), ""); status != 422 || !strings.Contains(body, "expected string") {
		t.Errorf("control: GET /plain/%s: %d %s; want 422, expected string", p.ID, status, body)
	}
	for _, in := range []string{"-1", "007", "%2B5", "9223372036854775808"} {
		if status, body := call(t, "GET", ts.URL+"/posts/"+in, ""); status != 422 && status != 400 {
			t.Errorf("GET /posts/%s: %d %s; want it refused", in, status, body)
		}
	}
}
