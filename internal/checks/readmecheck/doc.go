// Package readmecheck keeps the Go blocks of snowkey's README and guides
// true: its tests extract every ```go block of README.md (or of the
// Markdown file that SNOWKEY_README names) and of every docs/*.md, and
// build, vet and, where asked, run each one against the checkout, in a
// scratch module that replaces snowkey by it. README blocks build
// against snowkey's own dependencies; a guide's build against the
// examples module's (examples/go.mod), so that a guide for bun, sqlc or
// Prometheus can import them. A block marked run that reads DATABASE_URL
// or REDIS_URL gets a fresh PostgreSQL database or the test Redis there.
//
// A block is a complete Go file unless the line before it says otherwise
// in an HTML comment, which a rendered README does not show:
//
//	<!-- snippet: fragment -->
//	<!-- snippet: fragment(ctx context.Context, db *gorm.DB, r *http.Request) -->
//	<!-- snippet: continue -->
//	<!-- snippet: run -->
//
// A fragment is statements, which are wrapped in a function, or
// declarations, which stand at the top of a file; the names in
// parentheses are declared for it as variables of those types, so that a
// snippet can use a db or an r without showing where it came from, and
// the packages it names (tokens.New, json.Marshal) are imported for it.
// A block marked continue goes on with the fragment before it, after
// whatever prose stands between them: one program, explained in pieces,
// where a later piece uses what an earlier one declared.
// Everything else must compile as written: an unused variable or import,
// a name that does not exist, a wrong type, or a finding of go vet fails
// the block. A complete file must be gofmt-formatted; one marked run must
// be package main, and must exit 0.
//
// Errors point into the Markdown file (README.md:75:2: declared and not
// used: tok), through line directives in the generated files.
//
// BrokenLinks reads the same files for relative links that lead nowhere:
// to a file or directory the checkout lacks, or to a heading a page lacks.
//
//	go test ./internal/checks/readmecheck                                  # README.md and docs/*.md
//	SNOWKEY_README=/tmp/draft.md go test ./internal/checks/readmecheck     # a draft
package readmecheck
