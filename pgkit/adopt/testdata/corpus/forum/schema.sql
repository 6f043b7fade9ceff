-- A forum in a schema of its own, with names that need quotes ("Boards",
-- "BoardID"): a smallserial key, an identity key (ALWAYS) on members who
-- invite each other (a self-reference), posts in a tree (a self-reference,
-- ON DELETE CASCADE), votes keyed by (post, member), a one-to-one table
-- keyed by its post, a recursive view of the tree that carries keys in an
-- array, a view on it, a generated column, a materialized view, PL/pgSQL
-- and SQL functions over keys, a BEFORE INSERT trigger vouched for by
-- name, an AFTER trigger that queues posts, a statement trigger and a
-- publication of the schema. Written for snowkey's tests.

CREATE SCHEMA forum AUTHORIZATION {{owner}};
GRANT USAGE ON SCHEMA forum TO {{app}}, {{reporting}};
-- EXECUTE on snowflake_id(), which PUBLIC has unless an operator took it
-- away.
GRANT EXECUTE ON FUNCTION snowflake_id() TO {{owner}}, {{app}};
SET ROLE {{owner}};

CREATE TABLE forum."Boards" ("BoardID" smallserial PRIMARY KEY, title text NOT NULL UNIQUE, "Closed" boolean NOT NULL DEFAULT false);
CREATE TABLE forum.members (
	id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	handle text NOT NULL UNIQUE,
	invited_by int REFERENCES forum.members,
	joined_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON COLUMN forum.members.invited_by IS 'who brought them in';
CREATE TABLE forum.threads (
	id serial PRIMARY KEY,
	"BoardID" smallint NOT NULL REFERENCES forum."Boards",
	author_id int NOT NULL REFERENCES forum.members,
	title text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE forum.posts (
	id serial PRIMARY KEY,
	thread_id int NOT NULL REFERENCES forum.threads ON DELETE CASCADE,
	parent_id int REFERENCES forum.posts ON DELETE CASCADE,
	author_id int NOT NULL REFERENCES forum.members,
	body text NOT NULL,
	words int GENERATED ALWAYS AS (array_length(regexp_split_to_array(btrim(body), '\s+'), 1)) STORED,
	posted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX posts_thread ON forum.posts (thread_id, posted_at);
CREATE TABLE forum.votes (
	post_id int REFERENCES forum.posts ON DELETE CASCADE,
	member_id int REFERENCES forum.members,
	value smallint NOT NULL CHECK (value IN (-1, 1)),
	PRIMARY KEY (post_id, member_id)
);
CREATE TABLE forum.moderation_queue (post_id int PRIMARY KEY REFERENCES forum.posts ON DELETE CASCADE, reason text NOT NULL);

-- The tree of each thread's posts, with the path of keys to each.
CREATE VIEW forum.post_tree AS
	WITH RECURSIVE t AS (
		SELECT id, thread_id, parent_id, 1 AS depth, ARRAY[id] AS path FROM forum.posts WHERE parent_id IS NULL
		UNION ALL
		SELECT p.id, p.thread_id, p.parent_id, t.depth + 1, t.path || p.id FROM forum.posts p JOIN t ON p.parent_id = t.id)
	SELECT * FROM t;
CREATE VIEW forum.deep_posts AS SELECT id, thread_id, depth FROM forum.post_tree WHERE depth > 2;
CREATE VIEW forum.thread_scores AS
	SELECT p.thread_id, sum(v.value) AS score FROM forum.votes v JOIN forum.posts p ON p.id = v.post_id GROUP BY p.thread_id;
CREATE MATERIALIZED VIEW forum.board_activity AS
	SELECT t."BoardID", count(p.id) AS posts, max(p.posted_at) AS last_post
	FROM forum.threads t LEFT JOIN forum.posts p ON p.thread_id = t.id GROUP BY t."BoardID";
CREATE UNIQUE INDEX board_activity_key ON forum.board_activity ("BoardID");

-- Functions.
CREATE FUNCTION forum.post_depth(p_post_id integer) RETURNS integer LANGUAGE sql STABLE AS $$
	SELECT depth FROM forum.post_tree WHERE id = p_post_id
$$;
CREATE FUNCTION forum.reply(p_parent integer, p_author integer, p_body text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
	v_thread integer;
	v_post integer;
BEGIN
	SELECT thread_id INTO STRICT v_thread FROM forum.posts WHERE id = p_parent;
	INSERT INTO forum.posts (thread_id, parent_id, author_id, body) VALUES (v_thread, p_parent, p_author, p_body)
	RETURNING id INTO v_post;
	RETURN v_post;
END $$;
CREATE FUNCTION forum.karma(member integer) RETURNS bigint LANGUAGE sql STABLE AS $$
	SELECT coalesce(sum(v.value), 0) FROM forum.votes v JOIN forum.posts p ON p.id = v.post_id WHERE p.author_id = member
$$;

-- Triggers: one that counts the new post's words (it reads the key to
-- log it, so adopt cannot prove it leaves the key alone: it is vouched
-- for by name), one that queues downvoted posts, one per statement.
CREATE TABLE forum.post_log (post_id int REFERENCES forum.posts ON DELETE CASCADE, note text);
CREATE FUNCTION forum.check_post() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF btrim(NEW.body) = '' THEN
		RAISE EXCEPTION 'post % is empty', NEW.id;
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER check_post BEFORE INSERT ON forum.posts FOR EACH ROW EXECUTE FUNCTION forum.check_post();
CREATE FUNCTION forum.queue_downvoted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	v_post integer := NEW.post_id;
BEGIN
	IF (SELECT sum(value) FROM forum.votes WHERE post_id = v_post) <= -2 THEN
		INSERT INTO forum.moderation_queue (post_id, reason) VALUES (v_post, 'downvoted') ON CONFLICT DO NOTHING;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER queue_downvoted AFTER INSERT ON forum.votes FOR EACH ROW EXECUTE FUNCTION forum.queue_downvoted();
CREATE FUNCTION forum.log_threads() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO forum.post_log (note) VALUES (TG_OP || ' on threads');
	RETURN NULL;
END $$;
CREATE TRIGGER log_threads AFTER INSERT ON forum.threads FOR EACH STATEMENT EXECUTE FUNCTION forum.log_threads();

GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA forum TO {{app}};
GRANT SELECT ON forum.board_activity, forum.thread_scores TO {{reporting}};

-- The data.
INSERT INTO forum."Boards" (title) VALUES ('General'), ('Help'), ('Off topic');
INSERT INTO forum.members (handle) SELECT 'member' || i FROM generate_series(1, 12) i;
UPDATE forum.members SET invited_by = 1 WHERE id > 1 AND id <= 6;
UPDATE forum.members SET invited_by = id - 1 WHERE id > 6;
INSERT INTO forum.threads ("BoardID", author_id, title) SELECT 1 + i % 3, 1 + i % 12, 'thread ' || i FROM generate_series(1, 9) i;
INSERT INTO forum.posts (thread_id, author_id, body) SELECT i, 1 + i % 12, 'first post of thread ' || i FROM generate_series(1, 9) i;
INSERT INTO forum.posts (thread_id, parent_id, author_id, body) SELECT 1 + i % 9, 1 + i % 9, 1 + i % 12, 'a reply ' || i FROM generate_series(1, 27) i;
INSERT INTO forum.posts (thread_id, parent_id, author_id, body) SELECT thread_id, id, 3, 'a reply to a reply' FROM forum.posts WHERE id > 9 AND id <= 18;
INSERT INTO forum.votes SELECT p.id, m.id, CASE WHEN (p.id + m.id) % 5 = 0 THEN -1 ELSE 1 END
	FROM forum.posts p, forum.members m WHERE (p.id + m.id) % 3 = 0;
REFRESH MATERIALIZED VIEW forum.board_activity;

RESET ROLE;
CREATE PUBLICATION forum_changes FOR TABLES IN SCHEMA forum;
