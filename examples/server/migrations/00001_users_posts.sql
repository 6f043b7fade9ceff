-- The example's tables on PostgreSQL. The keys are snowflakes: the app
-- fills them from its generator (its worker number leased from
-- snowkey_worker_leases), and a row inserted by plain SQL gets one from
-- snowflake_id() (package migrations), whose reserved worker number never
-- collides with the app's. Embedded SQLite gets the same tables from GORM's
-- AutoMigrate instead (see store.go).

-- +goose Up
CREATE TABLE users (
	id            bigint PRIMARY KEY DEFAULT snowflake_id(),
	email         varchar(254) NOT NULL,
	password_hash text NOT NULL
);
CREATE UNIQUE INDEX idx_users_email ON users (email);

CREATE TABLE posts (
	id        bigint PRIMARY KEY DEFAULT snowflake_id(),
	author_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	title     varchar(200) NOT NULL,
	body      text NOT NULL
);
CREATE INDEX idx_posts_author_id ON posts (author_id);

-- +goose Down
DROP TABLE posts;
DROP TABLE users;
