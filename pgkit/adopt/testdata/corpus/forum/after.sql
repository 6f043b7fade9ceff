-- After adopting: a new board, member, thread and posts with snowflake
-- keys, a reply through forum.reply, votes that queue a post, the tree
-- view with its path of keys, the functions, the materialized view; and
-- the privileges. A statement after "-- expect SQLSTATE" must fail with
-- it.

CREATE TEMP TABLE new_keys (name text PRIMARY KEY, id bigint NOT NULL);
CREATE FUNCTION pg_temp.k(text) RETURNS bigint LANGUAGE sql STABLE AS 'SELECT id FROM new_keys WHERE name = $1';

WITH x AS (INSERT INTO forum."Boards" (title) VALUES ('New') RETURNING "BoardID") INSERT INTO new_keys SELECT 'board', "BoardID" FROM x;
WITH x AS (INSERT INTO forum.members (handle, invited_by) VALUES ('newcomer', 1) RETURNING id) INSERT INTO new_keys SELECT 'member', id FROM x;
WITH x AS (INSERT INTO forum.members (handle, invited_by) VALUES ('friend', pg_temp.k('member')) RETURNING id)
	INSERT INTO new_keys SELECT 'friend', id FROM x;
WITH x AS (INSERT INTO forum.threads ("BoardID", author_id, title) VALUES (pg_temp.k('board'), pg_temp.k('member'), 'hello') RETURNING id)
	INSERT INTO new_keys SELECT 'thread', id FROM x;
DO $$ BEGIN ASSERT (SELECT count(*) FROM forum.post_log WHERE note = 'INSERT on threads') = 2, 'log_threads'; END $$;
WITH x AS (INSERT INTO forum.posts (thread_id, author_id, body) VALUES (pg_temp.k('thread'), pg_temp.k('member'), 'hello all') RETURNING id)
	INSERT INTO new_keys SELECT 'post', id FROM x;
-- expect P0001
INSERT INTO forum.posts (thread_id, author_id, body) VALUES (pg_temp.k('thread'), pg_temp.k('member'), '   ');
INSERT INTO new_keys SELECT 'reply', forum.reply(pg_temp.k('post'), pg_temp.k('friend'), 'welcome');
INSERT INTO new_keys SELECT 'reply 2', forum.reply(pg_temp.k('reply'), pg_temp.k('member'), 'thanks, glad to be here');
DO $$ BEGIN ASSERT (SELECT words FROM forum.posts WHERE id = pg_temp.k('reply 2')) = 5, 'generated words'; END $$;
DO $$ BEGIN ASSERT forum.post_depth(pg_temp.k('reply 2')) = 3, 'post_depth'; END $$;
DO $$ BEGIN ASSERT (SELECT path FROM forum.post_tree WHERE id = pg_temp.k('reply 2'))
	= ARRAY[pg_temp.k('post'), pg_temp.k('reply'), pg_temp.k('reply 2')], 'post_tree'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM forum.deep_posts WHERE thread_id = pg_temp.k('thread')) = 1, 'deep_posts'; END $$;
INSERT INTO forum.votes VALUES (pg_temp.k('post'), pg_temp.k('friend'), -1), (pg_temp.k('post'), 2, -1), (pg_temp.k('reply'), pg_temp.k('member'), 1);
DO $$ BEGIN ASSERT (SELECT reason FROM forum.moderation_queue WHERE post_id = pg_temp.k('post')) = 'downvoted', 'queue_downvoted'; END $$;
INSERT INTO forum.moderation_queue (post_id, reason) VALUES (pg_temp.k('reply 2'), 'checked by hand');
INSERT INTO forum.post_log (post_id, note) VALUES (pg_temp.k('reply'), 'pinned');
DO $$ BEGIN ASSERT forum.karma(pg_temp.k('member')) = -2, 'karma'; END $$;
DO $$ BEGIN ASSERT (SELECT score FROM forum.thread_scores WHERE thread_id = pg_temp.k('thread')) = -1, 'thread_scores'; END $$;
INSERT INTO forum.post_events (post_id, kind) VALUES (pg_temp.k('post'), 'viewed');
REFRESH MATERIALIZED VIEW CONCURRENTLY forum.board_activity;
DO $$ BEGIN ASSERT (SELECT posts FROM forum.board_activity WHERE "BoardID" = pg_temp.k('board')) = 3, 'board_activity'; END $$;
-- The identity was dropped; the kept sequence goes on from its old value.
DO $$ BEGIN ASSERT nextval('forum.members_id_seq') = 13, 'members_id_seq'; END $$;

SET ROLE {{app}};
INSERT INTO forum.posts (thread_id, author_id, body) SELECT id, author_id, 'from the app' FROM forum.threads WHERE title = 'hello';
RESET ROLE;
SET ROLE {{reporting}};
SELECT count(*) FROM forum.board_activity;
-- expect 42501
SELECT count(*) FROM forum.post_tree;
RESET ROLE;
