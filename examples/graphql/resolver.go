package blog

import (
	"sync"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Resolver serves the schema from posts kept in memory, keyed by IDs
// from Gen. Its methods are in schema.resolvers.go, where gqlgen keeps
// them when it generates the code again.
type Resolver struct {
	Gen   idtype.Source
	mu    sync.Mutex
	posts []*Post // in ID order
}
