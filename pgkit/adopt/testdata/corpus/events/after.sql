-- After adopting: a new account and stream (which refer to each other),
-- events with snowflake keys that land in the partitions pgkit/partition
-- made, transfers through the procedure, the ledger's children, links and
-- snapshots that refer to events, the views and the materialized view; the
-- domain's and the exclusion constraint's checks still hold. A statement
-- after "-- expect SQLSTATE" must fail with it.

CREATE TEMP TABLE new_keys (name text PRIMARY KEY, id bigint NOT NULL);
CREATE FUNCTION pg_temp.k(text) RETURNS bigint LANGUAGE sql STABLE AS 'SELECT id FROM new_keys WHERE name = $1';

BEGIN;
INSERT INTO new_keys SELECT 'account', snowflake_id();
INSERT INTO new_keys SELECT 'stream', snowflake_id();
INSERT INTO accounts (id, path, name, parent_id, default_stream_id) VALUES (pg_temp.k('account'), 'root.assets.new', 'new', 1, pg_temp.k('stream'));
INSERT INTO streams (id, account_id, kind) VALUES (pg_temp.k('stream'), pg_temp.k('account'), 'ledger');
COMMIT;
INSERT INTO new_keys SELECT 'event', append_event(pg_temp.k('stream'), 'opened');
DO $$ BEGIN ASSERT (SELECT payload->>'v' FROM events WHERE id = pg_temp.k('event')) = '1', 'stamp_payload'; END $$;
DO $$ BEGIN ASSERT (SELECT seq FROM stream_events(pg_temp.k('stream')) WHERE id = pg_temp.k('event')) = 1, 'stream_events'; END $$;
WITH x AS (INSERT INTO events (stream_id, seq, kind) VALUES (pg_temp.k('stream'), 2, 'noted') RETURNING id)
	INSERT INTO new_keys SELECT 'event 2', id FROM x;
WITH x AS (INSERT INTO event_links (from_event, to_event, why) VALUES (pg_temp.k('event'), pg_temp.k('event 2'), 'next') RETURNING id)
	INSERT INTO new_keys SELECT 'link', id FROM x;
INSERT INTO snapshots (stream_id, last_event_id, state) VALUES (pg_temp.k('stream'), pg_temp.k('event 2'), '{"v": 2}');

-- Transfers between the new account and an old one, through the
-- procedure, the ledger's children and the deferred balance check.
CALL post_transfer(pg_temp.k('account'), 5, 700, NULL);
CALL post_transfer(5, pg_temp.k('account'), 200, NULL);
DO $$ BEGIN ASSERT balance_of(pg_temp.k('account')) = -500, 'balance_of'; END $$;
DO $$ BEGIN ASSERT subtree_balance('root.assets') = -1750, 'subtree_balance'; END $$;
DO $$ BEGIN ASSERT (SELECT balance FROM account_balances WHERE id = pg_temp.k('account')) = -500, 'account_balances'; END $$;
INSERT INTO ledger_entries (account_id, event_id, amount) VALUES (pg_temp.k('account'), pg_temp.k('event'), 1);
-- expect P0001
INSERT INTO debits (account_id, event_id, amount) VALUES (pg_temp.k('account'), pg_temp.k('event 2'), -5);
INSERT INTO account_periods VALUES (pg_temp.k('account'), '[2025-01-01,2026-01-01)');
-- expect 23P01
INSERT INTO account_periods VALUES (pg_temp.k('account'), '[2025-06-01,2025-07-01)');
-- The domain over the new keys keeps NOT NULL.
-- expect 23502
INSERT INTO streams (account_id, kind) VALUES (NULL, 'orphan');

-- Every event is where it belongs: old keys in the legacy partition, new
-- ones in the month pgkit/partition made.
DO $$ BEGIN ASSERT (SELECT tableoid::regclass::text FROM events WHERE id = pg_temp.k('event')) ~ '^events_p[0-9]{6}$', 'the event''s partition'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM ONLY events_default) = 0, 'nothing in the default partition'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM recent_events WHERE account_id = pg_temp.k('account')) = 3, 'recent_events'; END $$;
REFRESH MATERIALIZED VIEW CONCURRENTLY daily_totals;
DO $$ BEGIN ASSERT (SELECT events FROM daily_totals WHERE account_id = pg_temp.k('account')) = 3, 'daily_totals'; END $$;

SET ROLE {{reporting}};
SELECT count(*) FROM account_balances;
-- expect 42501
SELECT count(*) FROM recent_events;
RESET ROLE;
