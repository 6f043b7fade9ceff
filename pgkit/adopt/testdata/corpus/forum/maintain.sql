-- After adopting: what happens to posts, keyed by snowflakes and
-- partitioned by the time in its keys (pgkit/partition maintains it).
SET ROLE {{owner}};
CREATE TABLE forum.post_events (
	id bigint NOT NULL DEFAULT snowflake_id(),
	post_id bigint NOT NULL REFERENCES forum.posts ON DELETE CASCADE,
	kind text NOT NULL,
	PRIMARY KEY (id)
) PARTITION BY RANGE (id);
RESET ROLE;
