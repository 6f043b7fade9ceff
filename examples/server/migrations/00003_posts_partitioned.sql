-- Posts become a table partitioned by the time in their key: one partition
-- per calendar month (UTC), whose bounds are the first IDs of the month,
-- so that a month's posts are one table that a time-bounded read alone
-- visits. The partitions themselves are package partition's to make
-- (pgkit/partition, with Period Month, run at start-up and every hour, see
-- store.go); this migration makes the partitioned table and its default
-- partition, which holds any row whose month has no partition yet, and
-- which the maintenance moves rows out of when it makes their month.
--
-- PostgreSQL cannot partition a table in place, and package partition does
-- not convert one (its Maintain refuses a plain table, its Create would
-- build the table from the GORM model, not from these migrations), so an existing
-- database is upgraded here: the plain table is renamed away, the
-- partitioned one made under the old name, every row copied into it (all
-- land in the default partition; the app's start-up gives each past month
-- its partition and moves them there), and the plain table dropped. Goose
-- runs the migration in one transaction, and the rename takes an ACCESS
-- EXCLUSIVE lock until it commits, so a writer of another instance either
-- committed before (its row is copied) or waits and writes to the new
-- table: no post is lost.

-- +goose Up
ALTER TABLE posts RENAME TO posts_unpartitioned;
ALTER INDEX posts_pkey RENAME TO posts_unpartitioned_pkey;
ALTER INDEX idx_posts_author_id RENAME TO idx_posts_unpartitioned_author_id;
ALTER TABLE posts_unpartitioned RENAME CONSTRAINT posts_author_id_fkey TO posts_unpartitioned_author_id_fkey;

-- The primary key is the partition key, as PostgreSQL requires of every
-- unique constraint of a partitioned table.
CREATE TABLE posts (
	id        bigint NOT NULL DEFAULT snowflake_id(),
	author_id bigint NOT NULL,
	title     varchar(200) NOT NULL,
	body      text NOT NULL,
	CONSTRAINT posts_pkey PRIMARY KEY (id),
	CONSTRAINT posts_author_id_fkey FOREIGN KEY (author_id) REFERENCES users (id) ON DELETE CASCADE
) PARTITION BY RANGE (id);
CREATE INDEX idx_posts_author_id ON posts (author_id);
CREATE TABLE posts_default PARTITION OF posts DEFAULT;

INSERT INTO posts (id, author_id, title, body)
SELECT id, author_id, title, body FROM posts_unpartitioned;
DROP TABLE posts_unpartitioned;

-- +goose Down
ALTER TABLE posts RENAME TO posts_partitioned;
ALTER INDEX posts_pkey RENAME TO posts_partitioned_pkey;
ALTER INDEX idx_posts_author_id RENAME TO idx_posts_partitioned_author_id;
ALTER TABLE posts_partitioned RENAME CONSTRAINT posts_author_id_fkey TO posts_partitioned_author_id_fkey;

-- The names are given, as 00001 had them by default: the partitions still
-- hold constraints named so until the drop, and PostgreSQL would otherwise
-- pick another.
CREATE TABLE posts (
	id        bigint NOT NULL DEFAULT snowflake_id(),
	author_id bigint NOT NULL,
	title     varchar(200) NOT NULL,
	body      text NOT NULL,
	CONSTRAINT posts_pkey PRIMARY KEY (id),
	CONSTRAINT posts_author_id_fkey FOREIGN KEY (author_id) REFERENCES users (id) ON DELETE CASCADE
);
CREATE INDEX idx_posts_author_id ON posts (author_id);

INSERT INTO posts (id, author_id, title, body)
SELECT id, author_id, title, body FROM posts_partitioned;
-- Drops every partition with it.
DROP TABLE posts_partitioned;
