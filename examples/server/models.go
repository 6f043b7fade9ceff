package main

import (
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// User is an account. Its ID is a snowflake filled in on create, so it
// needs no created_at column: the ID holds the sign-up time.
type User struct {
	ID    idtype.ID `gorm:"primaryKey"`
	Email string    `gorm:"size:254;not null;uniqueIndex"`
	// Name is what other users see of the account: the author of its
	// posts. It is not unique, so it tells nothing about who has an
	// account.
	Name         string `gorm:"size:50;not null;default:''"`
	PasswordHash string `gorm:"not null"`
	// CredentialEpoch counts the password's changes: every change raises
	// it with the hash, in one statement. A login hands out its session
	// and device cookie only for the epoch whose password it checked (see
	// startSession and devices.go).
	CredentialEpoch int64 `gorm:"not null;default:0"`
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

// snowflakeModels are the models of every table whose key is a snowflake
// from the App's generator: SQLite's AutoMigrate makes their tables, and a
// fixed worker's restart floor reads their newest key (see ids.go). A new
// table goes here.
func snowflakeModels() []any { return []any{&User{}, &Post{}} }

// userJSON is the caller's own account as the API shows it. idtype.ID
// encodes as a JSON string, so a JavaScript client reads it exactly.
type userJSON struct {
	ID        idtype.ID `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

func (u *User) toJSON(l idtype.Layout) userJSON {
	return userJSON{ID: u.ID, Email: u.Email, Name: u.Name, CreatedAt: l.Decode(u.ID).Time}
}

// postJSON is a post as the API shows it, to any signed-in user: the
// author by ID and public name, never by email. created_at is decoded
// from the ID, the same way the web page decodes it in JavaScript.
type postJSON struct {
	ID         idtype.ID `json:"id"`
	AuthorID   idtype.ID `json:"author_id"`
	AuthorName string    `json:"author_name"`
	Title      string    `json:"title"`
	Body       string    `json:"body"`
	CreatedAt  time.Time `json:"created_at"`
}

func (p *Post) toJSON(l idtype.Layout) postJSON {
	return postJSON{
		ID:         p.ID,
		AuthorID:   p.AuthorID,
		AuthorName: p.Author.Name,
		Title:      p.Title,
		Body:       p.Body,
		CreatedAt:  l.Decode(p.ID).Time,
	}
}
