package openapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/snowkeyhq/snowkey/examples/openapi/oapigen"
	"github.com/snowkeyhq/snowkey/examples/openapi/ogenapi"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 5*time.Minute))
}

// above53 is an ID that a JSON number, read as a double, rounds.
const above53 idtype.ID = 1<<53 + 1

// post sends body to url and returns the status and the raw answer.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
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

// oapiServer implements the std-http-server oapi-codegen generated,
// from posts kept in memory.
type oapiServer struct {
	gen   *idtype.Generator
	mu    sync.Mutex
	posts map[idtype.ID]oapigen.Post
}

func (s *oapiServer) CreatePost(w http.ResponseWriter, r *http.Request) {
	var in oapigen.NewPost
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, err := s.gen.Next()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	p := oapigen.Post{Id: id, AuthorId: in.AuthorId, ParentId: in.ParentId, MentionIds: []oapigen.ID{}, Title: in.Title}
	if in.MentionIds != nil {
		p.MentionIds = *in.MentionIds
	}
	s.mu.Lock()
	s.posts[id] = p
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(p)
}

func (s *oapiServer) GetPost(w http.ResponseWriter, r *http.Request, id oapigen.ID) {
	s.mu.Lock()
	p, ok := s.posts[id]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(p)
}

func newGenerator(t *testing.T) *idtype.Generator {
	t.Helper()
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// TestOapiCodegen serves and calls the code oapi-codegen generated: its
// structs hold idtype.ID (x-go-type), which goes out as a string, comes
// in from a string or an exact number, and refuses anything else.
func TestOapiCodegen(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	var _ idtype.ID = oapigen.Post{}.Id // the generated field is snowkey's type
	srv := &oapiServer{gen: newGenerator(t), posts: map[idtype.ID]oapigen.Post{}}
	ts := httptest.NewServer(oapigen.HandlerFromMux(srv, http.NewServeMux()))
	t.Cleanup(ts.Close)

	client, err := oapigen.NewClientWithResponses(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	parent := above53 + 2
	res, err := client.CreatePostWithResponse(ctx, oapigen.NewPost{AuthorId: above53, ParentId: &parent, MentionIds: &[]oapigen.ID{idtype.MaxID}, Title: "hi"})
	if err != nil || res.JSON201 == nil {
		t.Fatalf("createPost: %v, %+v", err, res)
	}
	for _, want := range []string{`"author_id":"9007199254740993"`, `"parent_id":"9007199254740995"`, `"mention_ids":["9223372036854775807"]`, `"id":"` + res.JSON201.Id.String() + `"`} {
		if !strings.Contains(string(res.Body), want) {
			t.Errorf("the answer %s lacks %s", res.Body, want)
		}
	}
	got, err := client.GetPostWithResponse(ctx, res.JSON201.Id)
	if err != nil || got.JSON200 == nil || got.JSON200.AuthorId != above53 || *got.JSON200.ParentId != parent {
		t.Fatalf("getPost %s: %v, %s", res.JSON201.Id, err, got.Body)
	}

	// From other clients: an exact number is read exactly; what is not an
	// ID is refused, by idtype's own decoder.
	if status, body := post(t, ts.URL+"/posts", `{"author_id":9007199254740993,"title":"n"}`); status != 201 || !strings.Contains(body, `"author_id":"9007199254740993"`) {
		t.Errorf("a number: %d %s", status, body)
	}
	for _, in := range []string{`"-1"`, `"007"`, `1.5`, `"9223372036854775808"`, `true`} {
		if status, body := post(t, ts.URL+"/posts", `{"author_id":`+in+`,"title":"x"}`); status != 400 || !strings.Contains(body, "idtype:") {
			t.Errorf("author_id %s: %d %s; want 400 from idtype", in, status, body)
		}
	}
	if res, err := http.Get(ts.URL + "/posts/007"); err != nil || res.StatusCode != 400 {
		t.Errorf("GET /posts/007: %v %v; want 400", res.StatusCode, err)
	}
}

// ogenHandler implements the Handler ogen generated.
type ogenHandler struct {
	gen   *idtype.Generator
	mu    sync.Mutex
	posts map[ogenapi.ID]ogenapi.Post
}

func (h *ogenHandler) CreatePost(ctx context.Context, req *ogenapi.NewPost) (*ogenapi.Post, error) {
	id, err := h.gen.Next()
	if err != nil {
		return nil, err
	}
	p := ogenapi.Post{ID: ogenapi.ID(id), AuthorID: req.AuthorID, ParentID: req.ParentID, MentionIds: req.MentionIds, Title: req.Title}
	if p.MentionIds == nil {
		p.MentionIds = []ogenapi.ID{}
	}
	h.mu.Lock()
	h.posts[p.ID] = p
	h.mu.Unlock()
	return &p, nil
}

func (h *ogenHandler) GetPost(ctx context.Context, params ogenapi.GetPostParams) (ogenapi.GetPostRes, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.posts[params.ID]
	if !ok {
		return &ogenapi.GetPostNotFound{}, nil
	}
	return &p, nil
}

// TestOgen serves and calls the code ogen generated: it reads the ID
// schema (a string, format int64) as an exact int64 that goes out as a
// string and comes in only from a string; a JSON number is refused. ogen
// does not apply the pattern to an int64, so it takes "-1" (as
// docs/openapi.md says: the handler checks for negatives).
func TestOgen(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	h := &ogenHandler{gen: newGenerator(t), posts: map[ogenapi.ID]ogenapi.Post{}}
	srv, err := ogenapi.NewServer(h)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	client, err := ogenapi.NewClient(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := client.CreatePost(ctx, &ogenapi.NewPost{AuthorID: ogenapi.ID(above53), ParentID: ogenapi.NewOptID(ogenapi.ID(idtype.MaxID)), Title: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.GetPost(ctx, ogenapi.GetPostParams{ID: p.ID})
	if got, ok := res.(*ogenapi.Post); err != nil || !ok || idtype.ID(got.AuthorID) != above53 || idtype.ID(got.ParentID.Value) != idtype.MaxID {
		t.Fatalf("getPost %d: %#v, %v", p.ID, res, err)
	}

	status, body := post(t, ts.URL+"/posts", `{"author_id":"9007199254740993","parent_id":"9223372036854775807","title":"s"}`)
	if status != 200 && status != 201 || !strings.Contains(body, `"author_id":"9007199254740993"`) || !strings.Contains(body, `"parent_id":"9223372036854775807"`) {
		t.Errorf("strings: %d %s", status, body)
	}
	for _, in := range []string{`9007199254740993`, `"1.5"`, `"9223372036854775808"`, `"x"`} {
		if status, body := post(t, ts.URL+"/posts", `{"author_id":`+in+`,"title":"x"}`); status != 400 {
			t.Errorf("author_id %s: %d %s; want 400", in, status, body)
		}
	}
	if status, body := post(t, ts.URL+"/posts", `{"author_id":"-1","title":"x"}`); status == 400 || !strings.Contains(body, `"author_id":"-1"`) {
		t.Errorf(`author_id "-1": %d %s; docs/openapi.md says ogen takes it`, status, body)
	}
}

// jsonFields returns the JSON names of a struct type's fields.
func jsonFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestSchemaMatches checks the committed generated code against
// openapi.yaml without the generators: the ID schema is the one
// docs/openapi.md gives, and each generated struct has exactly the
// properties its schema declares, its ID fields of the mapped types.
// (make generate-check runs the generators themselves:
// TestGeneratedIsCurrent.)
func TestSchemaMatches(t *testing.T) {
	testenv.Deadline(t, time.Minute)
	doc, err := openapi3.NewLoader().LoadFromFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	id := doc.Components.Schemas["ID"].Value
	if !id.Type.Is("string") || id.Format != "int64" || id.Pattern != `^(0|[1-9][0-9]{0,18})$` || id.Extensions["x-go-type"] != "idtype.ID" {
		t.Errorf("the ID schema: type %v, format %q, pattern %q, x-go-type %v", id.Type, id.Format, id.Pattern, id.Extensions["x-go-type"])
	}
	for name, types := range map[string][]reflect.Type{
		"Post":    {reflect.TypeFor[oapigen.Post](), reflect.TypeFor[ogenapi.Post]()},
		"NewPost": {reflect.TypeFor[oapigen.NewPost](), reflect.TypeFor[ogenapi.NewPost]()},
	} {
		var props []string
		for p, ref := range doc.Components.Schemas[name].Value.Properties {
			props = append(props, p)
			if ref.Ref == "#/components/schemas/ID" || (ref.Value.Items != nil && ref.Value.Items.Ref == "#/components/schemas/ID") {
				for _, typ := range types {
					f, ok := fieldByJSON(typ, p)
					if !ok || !strings.Contains(f.String(), "ID") {
						t.Errorf("%s.%s of %s is a %s, not an ID", name, p, typ, f)
					}
				}
			}
		}
		slices.Sort(props)
		for _, typ := range types {
			if got := jsonFields(typ); !slices.Equal(got, props) {
				t.Errorf("%s has fields %v; openapi.yaml's %s has %v", typ, got, name, props)
			}
		}
	}
	// oapi-codegen's ID is snowkey's type itself, ogen's an int64.
	if reflect.TypeFor[oapigen.ID]() != reflect.TypeFor[idtype.ID]() || reflect.TypeFor[ogenapi.ID]().Kind() != reflect.Int64 {
		t.Errorf("oapigen.ID is %v, ogenapi.ID %v", reflect.TypeFor[oapigen.ID](), reflect.TypeFor[ogenapi.ID]())
	}
}

func fieldByJSON(t reflect.Type, name string) (reflect.Type, bool) {
	for f := range t.Fields() {
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name {
			return f.Type, true
		}
	}
	return nil, false
}
