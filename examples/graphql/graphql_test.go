package blog_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/snowkeyhq/snowkey/examples/graphql"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 5*time.Minute))
}

// above53 is an ID that a JSON number, read as a double, rounds: the
// test sees it arrive exact.
const above53 = "9007199254740993"

// startServer serves the gqlgen-generated schema over HTTP POST, as an
// app would.
func startServer(t *testing.T) *httptest.Server {
	t.Helper()
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		t.Fatal(err)
	}
	srv := handler.New(blog.NewExecutableSchema(blog.Config{Resolvers: &blog.Resolver{Gen: gen}}))
	srv.AddTransport(transport.POST{})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

type gqlResponse struct {
	raw    string
	Data   map[string]json.RawMessage `json:"data"`
	Errors []struct {
		Message string `json:"message"`
		Path    []any  `json:"path"`
	} `json:"errors"`
}

// query posts a GraphQL request; variables is JSON text or "".
func query(t *testing.T, ts *httptest.Server, q, variables string) gqlResponse {
	t.Helper()
	body := `{"query":` + mustJSON(t, q)
	if variables != "" {
		body += `,"variables":` + variables
	}
	body += "}"
	res, err := http.Post(ts.URL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(res.Body); err != nil {
		t.Fatal(err)
	}
	r := gqlResponse{raw: buf.String()}
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		t.Fatalf("response %s: %v", buf.String(), err)
	}
	return r
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServer runs the generated server against idtype.ID, sqltype.NullID
// and sqltype.IDs: every ID goes out as a JSON string, exactly; each
// comes in from a string or an integer, literal or variable, exactly;
// what is not an exact ID is refused with idtype's error, naming it.
func TestServer(t *testing.T) {
	testenv.Deadline(t, time.Minute)
	ts := startServer(t)
	const create = `mutation($in: NewPost!) { createPost(input: $in) { id authorId parentId mentionIds title } }`

	// Literals: an integer past 2^53, a string, a list of both.
	r := query(t, ts, `mutation { createPost(input: {authorId: `+above53+`, parentId: "9223372036854775807", mentionIds: ["1", 2], title: "lit"}) { id authorId parentId mentionIds } }`, "")
	if len(r.Errors) > 0 {
		t.Fatalf("createPost from literals: %s", r.raw)
	}
	for _, want := range []string{`"authorId":"` + above53 + `"`, `"parentId":"9223372036854775807"`, `"mentionIds":["1","2"]`} {
		if !strings.Contains(r.raw, want) {
			t.Errorf("the answer %s lacks %s", r.raw, want)
		}
	}
	// The control: the same ID as a JSON number would not have arrived.
	var asNumber float64
	if err := json.Unmarshal([]byte(above53), &asNumber); err != nil || json.Number(above53).String() == mustJSON(t, asNumber) {
		t.Fatalf("%s survives a double (%v); the test proves nothing", above53, asNumber)
	}
	var first struct {
		ID idtype.ID `json:"id"`
	}
	if err := json.Unmarshal(r.Data["createPost"], &first); err != nil || first.ID == 0 {
		t.Fatalf("the new post's id: %s, %v", r.Data["createPost"], err)
	}
	if !strings.Contains(r.raw, `"id":"`+first.ID.String()+`"`) {
		t.Errorf("the id is not sent as a string: %s", r.raw)
	}

	// Variables: JSON numbers (gqlgen reads them as json.Number) and
	// strings; null and a missing list.
	r = query(t, ts, create, `{"in":{"authorId":`+above53+`,"parentId":null,"title":"vars"}}`)
	if len(r.Errors) > 0 || !strings.Contains(r.raw, `"authorId":"`+above53+`"`) || !strings.Contains(r.raw, `"parentId":null`) ||
		!strings.Contains(r.raw, `"mentionIds":[]`) {
		t.Errorf("createPost from variables: %s", r.raw)
	}
	r = query(t, ts, create, `{"in":{"authorId":"5","parentId":"`+first.ID.String()+`","mentionIds":"7","title":"one"}}`)
	if len(r.Errors) > 0 || !strings.Contains(r.raw, `"parentId":"`+first.ID.String()+`"`) || !strings.Contains(r.raw, `"mentionIds":["7"]`) {
		t.Errorf("createPost with a single mention (a list of one): %s", r.raw)
	}

	// Reads: by ID, and a range between IDs.
	r = query(t, ts, `query($id: ID!) { post(id: $id) { title } }`, `{"id":"`+first.ID.String()+`"}`)
	if !strings.Contains(r.raw, `"title":"lit"`) {
		t.Errorf("post(id): %s", r.raw)
	}
	r = query(t, ts, `{ posts(after: "`+first.ID.String()+`") { title } }`, "")
	if strings.Contains(r.raw, `"lit"`) || !strings.Contains(r.raw, `"vars"`) || !strings.Contains(r.raw, `"one"`) {
		t.Errorf("posts(after): %s", r.raw)
	}
	r = query(t, ts, `mutation($ids: [ID!]!) { deletePosts(ids: $ids) }`, `{"ids":["`+first.ID.String()+`", 1]}`)
	if !strings.Contains(r.raw, `"deletePosts":["`+first.ID.String()+`"]`) {
		t.Errorf("deletePosts: %s", r.raw)
	}

	// Refusals, each an error that names the input, and nothing made. A
	// fraction or a boolean literal, and a boolean variable, are refused
	// by gqlgen's validation before the ID's methods see them; the rest
	// by UnmarshalGQL.
	for _, tc := range []struct{ name, q, vars, want string }{
		{"a fraction literal", `mutation { createPost(input: {authorId: 1.5, title: "x"}) { id } }`, "", "cannot represent a non-string and non-integer value: 1.5"},
		{"a fraction variable", create, `{"in":{"authorId":1.0,"title":"x"}}`, `"1.0": not a decimal integer: fraction`},
		{"an exponent variable", create, `{"in":{"authorId":1e3,"title":"x"}}`, `"1e3": not a decimal integer: exponent`},
		{"a negative literal", `mutation { createPost(input: {authorId: -1, title: "x"}) { id } }`, "", "int64(-1): negative"},
		{"a negative string", create, `{"in":{"authorId":"-1","title":"x"}}`, `"-1": negative`},
		{"past 2^63-1", create, `{"in":{"authorId":9223372036854775808,"title":"x"}}`, "out of range"},
		{"a leading zero", create, `{"in":{"authorId":"007","title":"x"}}`, "leading zero"},
		{"a list element", create, `{"in":{"authorId":"1","mentionIds":["1","x"],"title":"x"}}`, "element 1"},
		{"a boolean", create, `{"in":{"authorId":true,"title":"x"}}`, "cannot use bool as ID"},
		{"a boolean in a list", create, `{"in":{"authorId":"1","mentionIds":[true],"title":"x"}}`, "cannot use bool as ID"},
	} {
		r := query(t, ts, tc.q, tc.vars)
		if len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, tc.want) || (r.Data["createPost"] != nil && string(r.Data["createPost"]) != "null") {
			t.Errorf("%s: %s; want an error containing %q", tc.name, r.raw, tc.want)
		}
	}
	r = query(t, ts, `{ posts { title } }`, "")
	if n := strings.Count(r.raw, `"title"`); n != 2 {
		t.Errorf("after the refusals, %d posts; want the 2 made before: %s", n, r.raw)
	}
}

// TestSchemaServed checks the committed generated code against
// schema.graphqls without gqlgen: every field of every object type the
// schema declares is served, with no error, in a query that selects them
// all. (make generate-check runs gqlgen itself: TestGeneratedIsCurrent.)
func TestSchemaServed(t *testing.T) {
	testenv.Deadline(t, time.Minute)
	src, err := os.ReadFile("schema.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	schema, gqlErr := gqlparser.LoadSchema(&ast.Source{Name: "schema.graphqls", Input: string(src)})
	if gqlErr != nil {
		t.Fatal(gqlErr)
	}
	ts := startServer(t)
	var fields []string
	for _, f := range schema.Types["Post"].Fields {
		fields = append(fields, f.Name)
	}
	if len(fields) < 5 {
		t.Fatalf("Post has fields %v", fields)
	}
	sel := strings.Join(fields, " ")
	r := query(t, ts, `mutation { createPost(input: {authorId: "1", parentId: "2", mentionIds: ["3"], title: "t"}) { `+sel+` } }`, "")
	if len(r.Errors) > 0 {
		t.Fatalf("createPost selecting every field of Post (%s): %s", sel, r.raw)
	}
	var p struct {
		ID idtype.ID `json:"id"`
	}
	if err := json.Unmarshal(r.Data["createPost"], &p); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`{ post(id: "` + p.ID.String() + `") { ` + sel + ` } }`,
		`{ posts(after: "0", before: "9223372036854775807") { ` + sel + ` } }`,
		`mutation { deletePosts(ids: ["` + p.ID.String() + `"]) }`,
	} {
		if r := query(t, ts, q, ""); len(r.Errors) > 0 {
			t.Errorf("%s: %s", q, r.raw)
		}
	}
	// The queries above are every root field there is.
	var roots []string
	for _, typ := range []string{"Query", "Mutation"} {
		for _, f := range schema.Types[typ].Fields {
			if !strings.HasPrefix(f.Name, "__") {
				roots = append(roots, typ+"."+f.Name)
			}
		}
	}
	if got := strings.Join(roots, " "); got != "Query.post Query.posts Mutation.createPost Mutation.deletePosts" {
		t.Errorf("the schema's root fields are %s; query each here", got)
	}
}
