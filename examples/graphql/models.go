// Package blog is a GraphQL server made by gqlgen whose keys are
// snowflakes: the ID scalar is bound to idtype.ID, sqltype.NullID and
// sqltype.IDs by their MarshalGQL and UnmarshalGQL methods, with no
// marshaling code of its own.
package blog

import (
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// Post is a blog post, as a GORM model would hold it.
type Post struct {
	ID         idtype.ID      `json:"id"`
	AuthorID   idtype.ID      `json:"authorId"`
	ParentID   sqltype.NullID `json:"parentId"`
	MentionIDs sqltype.IDs    `json:"mentionIds"`
	Title      string         `json:"title"`
}

// NewPost is the input of createPost.
type NewPost struct {
	AuthorID   idtype.ID      `json:"authorId"`
	ParentID   sqltype.NullID `json:"parentId"`
	MentionIDs sqltype.IDs    `json:"mentionIds"`
	Title      string         `json:"title"`
}
