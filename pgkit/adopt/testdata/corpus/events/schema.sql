-- An event log and a ledger: events partitioned by range on their own
-- bigserial key (with a legacy partition, whose keys stay, and a default
-- one), which other adopted tables refer to; accounts in a tree (ltree,
-- a self-reference) that refer to their default stream while streams
-- refer to accounts (a cycle, deferred); ledger entries split by
-- inheritance into debits and credits, whose account column comes from
-- the parent; a domain over integer for account references that an
-- exclusion constraint uses (btree_gist); a generated column on the
-- partitioned table; a SQL-standard function (BEGIN ATOMIC) and a view
-- on it; a materialized view; a procedure that posts transfers; row,
-- statement and constraint triggers; a publication through the
-- partition root. Written for snowkey's tests.

CREATE EXTENSION IF NOT EXISTS ltree;
CREATE EXTENSION IF NOT EXISTS btree_gist;
GRANT CREATE ON SCHEMA public TO {{owner}};
-- EXECUTE on snowflake_id(), which PUBLIC has unless an operator took it
-- away.
GRANT EXECUTE ON FUNCTION snowflake_id() TO {{owner}}, {{app}};
SET ROLE {{owner}};

CREATE DOMAIN account_ref AS integer NOT NULL CHECK (VALUE > 0);
COMMENT ON DOMAIN account_ref IS 'an account, never none';
CREATE DOMAIN amount_cents AS bigint NOT NULL CHECK (VALUE <> 0);

CREATE TABLE accounts (
	id serial PRIMARY KEY,
	path ltree NOT NULL UNIQUE,
	name text NOT NULL,
	parent_id int REFERENCES accounts,
	default_stream_id int,
	opened_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX accounts_path ON accounts USING gist (path);
CREATE TABLE streams (
	id serial PRIMARY KEY,
	account_id account_ref REFERENCES accounts DEFERRABLE INITIALLY DEFERRED,
	kind text NOT NULL,
	version int NOT NULL DEFAULT 0
);
ALTER TABLE accounts ADD CONSTRAINT accounts_default_stream_fkey FOREIGN KEY (default_stream_id) REFERENCES streams
	DEFERRABLE INITIALLY DEFERRED;

-- Events, partitioned by their key: legacy keys in a partition of their
-- own, and a default partition.
CREATE TABLE events (
	id bigserial,
	stream_id int NOT NULL REFERENCES streams,
	seq int NOT NULL,
	kind text NOT NULL,
	payload jsonb NOT NULL DEFAULT '{}',
	recorded_at timestamptz NOT NULL DEFAULT now(),
	day date GENERATED ALWAYS AS ((recorded_at AT TIME ZONE 'UTC')::date) STORED,
	PRIMARY KEY (id)
) PARTITION BY RANGE (id);
CREATE TABLE events_legacy PARTITION OF events FOR VALUES FROM (MINVALUE) TO (100000000);
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE INDEX events_stream ON events (stream_id, seq);
CREATE TABLE event_links (id serial PRIMARY KEY, from_event bigint NOT NULL REFERENCES events, to_event bigint NOT NULL REFERENCES events,
	why text);
CREATE TABLE snapshots (stream_id int PRIMARY KEY REFERENCES streams, last_event_id bigint NOT NULL REFERENCES events, state jsonb NOT NULL);

-- The ledger, by inheritance.
CREATE TABLE ledger_entries (id serial PRIMARY KEY, account_id int NOT NULL, event_id bigint REFERENCES events, amount amount_cents,
	posted_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE debits () INHERITS (ledger_entries);
CREATE TABLE credits () INHERITS (ledger_entries);
ALTER TABLE debits ADD FOREIGN KEY (account_id) REFERENCES accounts, ADD FOREIGN KEY (event_id) REFERENCES events, ADD CHECK (amount < 0);
ALTER TABLE credits ADD FOREIGN KEY (account_id) REFERENCES accounts, ADD FOREIGN KEY (event_id) REFERENCES events, ADD CHECK (amount > 0);
CREATE TABLE account_periods (
	account_id account_ref REFERENCES accounts,
	period daterange NOT NULL,
	EXCLUDE USING gist (account_id WITH =, period WITH &&)
);

-- Functions and a procedure.
CREATE FUNCTION append_event(p_stream_id integer, p_kind text, p_payload jsonb DEFAULT '{}') RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	v_seq integer;
	v_id bigint;
BEGIN
	UPDATE streams SET version = version + 1 WHERE id = p_stream_id RETURNING version INTO v_seq;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no stream %', p_stream_id;
	END IF;
	INSERT INTO events (stream_id, seq, kind, payload) VALUES (p_stream_id, v_seq, p_kind, p_payload) RETURNING id INTO v_id;
	RETURN v_id;
END $$;
CREATE FUNCTION stream_events(p_stream_id integer) RETURNS SETOF events LANGUAGE sql STABLE AS $$
	SELECT * FROM events WHERE stream_id = p_stream_id ORDER BY seq
$$;
CREATE FUNCTION balance_of(p_account_id integer) RETURNS bigint LANGUAGE sql STABLE
BEGIN ATOMIC
	SELECT coalesce(sum(amount), 0) FROM ledger_entries WHERE account_id = p_account_id;
END;
CREATE FUNCTION subtree_balance(p_path ltree) RETURNS numeric LANGUAGE sql STABLE AS $$
	SELECT coalesce(sum(balance_of(id)), 0) FROM accounts WHERE path <@ p_path
$$;
CREATE PROCEDURE post_transfer(p_from integer, p_to integer, p_cents bigint, INOUT p_event bigint DEFAULT NULL) LANGUAGE plpgsql AS $$
DECLARE
	v_stream integer;
BEGIN
	SELECT default_stream_id INTO v_stream FROM accounts WHERE id = p_from;
	p_event := append_event(v_stream, 'transfer', jsonb_build_object('from', p_from, 'to', p_to, 'cents', p_cents));
	INSERT INTO debits (account_id, event_id, amount) VALUES (p_from, p_event, -p_cents);
	INSERT INTO credits (account_id, event_id, amount) VALUES (p_to, p_event, p_cents);
END $$;

-- Triggers: a BEFORE INSERT on the partitioned table that stamps the
-- payload's version (proven to leave the key alone), a statement trigger,
-- a deferred constraint trigger that checks each transfer balances.
CREATE FUNCTION stamp_payload() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.payload := NEW.payload || jsonb_build_object('v', 1);
	RETURN NEW;
END $$;
CREATE TRIGGER stamp_payload BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION stamp_payload();
CREATE FUNCTION announce_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('events', TG_TABLE_NAME);
	RETURN NULL;
END $$;
CREATE TRIGGER announce_events AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION announce_events();
CREATE FUNCTION check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	v_event bigint := NEW.event_id;
BEGIN
	IF (SELECT sum(amount) FROM ledger_entries WHERE event_id = v_event) <> 0 THEN
		RAISE EXCEPTION 'event % does not balance', v_event;
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER debits_balanced AFTER INSERT ON debits DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION check_balanced();

-- Views and a materialized view.
CREATE VIEW account_balances AS SELECT a.id, a.path, balance_of(a.id) AS balance FROM accounts a;
CREATE VIEW recent_events WITH (security_barrier = true) AS
	SELECT e.id, e.stream_id, s.account_id, e.kind, e.recorded_at FROM events e JOIN streams s ON s.id = e.stream_id
	WHERE e.recorded_at > now() - interval '30 days';
CREATE MATERIALIZED VIEW daily_totals AS
	SELECT e.day, s.account_id, count(*) AS events FROM events e JOIN streams s ON s.id = e.stream_id GROUP BY e.day, s.account_id;
CREATE UNIQUE INDEX daily_totals_key ON daily_totals (day, account_id);

GRANT SELECT, INSERT, UPDATE ON accounts, streams, events, event_links, snapshots, ledger_entries, debits, credits, account_periods,
	account_balances, recent_events, daily_totals TO {{app}};
GRANT USAGE ON SEQUENCE accounts_id_seq, streams_id_seq, events_id_seq, event_links_id_seq, ledger_entries_id_seq TO {{app}};
GRANT SELECT ON account_balances, daily_totals TO {{reporting}};

-- The data.
BEGIN;
INSERT INTO accounts (id, path, name, default_stream_id)
	SELECT i, ('root.' || CASE WHEN i <= 4 THEN 'assets' ELSE 'liabilities' END || '.a' || i)::ltree, 'account ' || i, i
	FROM generate_series(1, 8) i;
INSERT INTO streams (id, account_id, kind) SELECT i, i, 'ledger' FROM generate_series(1, 8) i;
COMMIT;
SELECT setval('accounts_id_seq', 8), setval('streams_id_seq', 8);
UPDATE accounts SET parent_id = 1 WHERE id IN (2, 3, 4);
UPDATE accounts SET parent_id = 5 WHERE id > 5;
INSERT INTO events (stream_id, seq, kind, recorded_at) SELECT 1 + i % 8, i, 'opened', now() - i * interval '1 hour'
	FROM generate_series(1, 60) i;
CALL post_transfer(1, 5, 1000);
CALL post_transfer(2, 6, 250);
INSERT INTO event_links (from_event, to_event, why) SELECT id, id + 1, 'next' FROM events WHERE id < 10;
INSERT INTO snapshots (stream_id, last_event_id, state) SELECT stream_id, max(id), '{}' FROM events GROUP BY stream_id;
INSERT INTO account_periods VALUES (1, '[2024-01-01,2025-01-01)'), (1, '[2025-01-01,2026-01-01)'), (2, '[2024-01-01,2026-01-01)');
REFRESH MATERIALIZED VIEW daily_totals;

RESET ROLE;
CREATE PUBLICATION ledger_changes FOR TABLE events, ledger_entries, debits, credits WITH (publish_via_partition_root = true);
