package main

import (
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// User is an account. Its ID is a snowflake filled in on create, so it
// needs no created_at column: the ID holds the sign-up time.
type User struct {
	ID           idtype.ID `gorm:"primaryKey"`
	Email        string    `gorm:"size:254;not null;uniqueIndex"`
	PasswordHash string    `gorm:"not null"`
}

// Post is a message by a user. Posts are listed newest first by ID alone:
// snowflakes sort by time, so the primary key is also the time index and
// the pagination cursor.
type Post struct {
	ID       idtype.ID `gorm:"primaryKey"`
	AuthorID idtype.ID `gorm:"not null;index"`
	Author   User      `gorm:"foreignKey:AuthorID;constraint:OnDelete:CASCADE"`
	Title    string    `gorm:"size:200;not null"`
	Body     string    `gorm:"not null"`
}

// userJSON is a user as the API shows it. idtype.ID encodes as a JSON
// string, so a JavaScript client reads it exactly.
type userJSON struct {
	ID        idtype.ID `json:"id"`
	Email     string    `json:"email"`
	CreatedAt time.Time `json:"created_at"`
}

func (u *User) toJSON() userJSON {
	return userJSON{ID: u.ID, Email: u.Email, CreatedAt: u.ID.Time()}
}

// postJSON is a post as the API shows it; created_at is decoded from the
// ID, the same way the web page decodes it in JavaScript.
type postJSON struct {
	ID          idtype.ID `json:"id"`
	AuthorID    idtype.ID `json:"author_id"`
	AuthorEmail string    `json:"author_email"`
	Title       string    `json:"title"`
	Body        string    `json:"body"`
	CreatedAt   time.Time `json:"created_at"`
}

func (p *Post) toJSON() postJSON {
	return postJSON{
		ID:          p.ID,
		AuthorID:    p.AuthorID,
		AuthorEmail: p.Author.Email,
		Title:       p.Title,
		Body:        p.Body,
		CreatedAt:   p.ID.Time(),
	}
}
