-- The queries of package blog. A parameter compared with a column takes
-- the column's Go type (its override in sqlc.yaml); a parameter sqlc
-- can only type by a cast takes the cast's type, so lists of IDs are
-- cast to the id_list domain, which sqlc.yaml maps to sqltype.IDs.

-- name: CreateAuthor :one
INSERT INTO authors (id, name) VALUES ($1, $2)
RETURNING *;

-- name: CreatePost :one
INSERT INTO posts (id, author_id, reply_to, mentions, body)
VALUES ($1, $2, $3, $4, $5)
RETURNING *;

-- name: GetPost :one
SELECT * FROM posts WHERE id = $1;

-- name: PostsByID :many
SELECT * FROM posts WHERE id = ANY(sqlc.arg(ids)::id_list) ORDER BY id;

-- name: Replies :many
SELECT r.* FROM posts r JOIN posts p ON r.reply_to = p.id
WHERE p.id = sqlc.arg(post_id) ORDER BY r.id;

-- name: Mentioning :many
SELECT p.* FROM posts p JOIN authors a ON a.id = ANY(p.mentions)
WHERE a.id = sqlc.arg(author_id) ORDER BY p.id;

-- name: LogEvent :one
INSERT INTO post_events (post_id, kind) VALUES ($1, $2)
RETURNING id;
