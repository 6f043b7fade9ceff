-- snowflake_server_worker(): the worker number snowflake_id() issues on,
-- apart from the number it names. Its IDs, rules and state are those of
-- 00001_snowflake_id.sql and 00004_snowflake_id_fast_path.sql; this file
-- changes only which function they take the worker from.
--
--   * snowflake_reserved_worker() names the number: the one the worker
--     leases of package workerid skip, and the one ReservedWorkerOf reads.
--     It answers wherever it runs, on a standby or on a copy of the
--     database too, so that a lease store kept in a copy keeps working.
--   * snowflake_server_worker() is the number snowflake_id() puts in its
--     IDs. Here it is snowflake_reserved_worker(). migrations.Up with
--     Options.WorkerPool replaces it with a body that returns the number
--     claimed for this server only where it runs on that server (its
--     system identifier, its timeline, the database), and refuses
--     elsewhere with SQLSTATE SK005 (migrations.SQLStateNoServerWorker):
--     on a copy, on a promoted standby, on a server restored to a point
--     in time.
--
-- Both are IMMUTABLE: the planner folds snowflake_server_worker() into a
-- constant once per plan of a statement that calls snowflake_id(), so the
-- check costs nothing per ID. CREATE OR REPLACE of either invalidates those
-- plans in every session.

-- +goose Up

-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($create$
CREATE FUNCTION %1$I.snowflake_server_worker() RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $fn$SELECT %1$I.snowflake_reserved_worker()$fn$
$create$, current_schema());
END
$migration$;
-- +goose StatementEnd

COMMENT ON FUNCTION snowflake_server_worker() IS
    'snowkey: the worker number snowflake_id() issues on here: snowflake_reserved_worker(), checked where the number was claimed for a server';

-- snowflake_id() and snowflake_id_slow() of 00004, taking the worker from
-- snowflake_server_worker(); %1$I is the schema, %2$L the state, %3$L
-- snowflake_id_seq; %% is a literal %, for RAISE.
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.snowflake_id_slow() RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $fn$
DECLARE
    w      bigint := %1$I.snowflake_server_worker();
    now_ms bigint;
    t      bigint;
    m      bigint;
    id     bigint;
BEGIN
    LOOP
        now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657;
        id := NULL;
        BEGIN
            -- Lock, then read the state: CASE evaluates its condition
            -- first. void IS NULL is false.
            t := CASE WHEN pg_advisory_xact_lock(8317708120493488433) IS NULL THEN NULL
                      ELSE pg_sequence_last_value(%2$L::regclass) END;
            IF t IS NULL THEN
                RAISE EXCEPTION 'snowflake_id: cannot read the state %%', %2$L
                    USING ERRCODE = '55000',
                          HINT = 'The state is set by the migration; this role needs USAGE and UPDATE on it.';
            END IF;
            m := t >> 22;
            IF m - now_ms > 1000 THEN
                NULL; -- the clock is far behind: refused below, nothing issued
            ELSIF m >= now_ms AND (t >> 12) & 1023 = w THEN
                -- The state's millisecond is now (or ahead, and waited for
                -- below): the next ID in it, unless it is spent.
                id := nextval(%3$L::regclass);
                IF id >> 12 <> t >> 12 THEN
                    id := NULL;
                    m := m + 1;
                END IF;
            ELSE
                m := GREATEST(now_ms, m + 1);
            END IF;
            IF id IS NULL AND m > t >> 22 THEN
                IF m > 2199023255551 THEN
                    RAISE EXCEPTION 'snowflake_id: the clock (%%) is past 2080-07-10T17:30:30.208Z, the last time the layout holds',
                        clock_timestamp() USING ERRCODE = 'SK002';
                END IF;
                -- A new millisecond: the sequence first, then the state.
                id := (m << 22) | (w << 12);
                t := setval(%3$L::regclass, id);
                t := setval(%2$L::regclass, id);
            END IF;
            RAISE SQLSTATE 'SK000';
        EXCEPTION WHEN SQLSTATE 'SK000' THEN
            -- The lock is released.
        END;
        IF m - now_ms > 1000 THEN
            RAISE EXCEPTION 'snowflake_id: the clock (%%) is %% ms behind the last ID issued; not waiting more than 1000 ms',
                clock_timestamp(), m - now_ms
                USING ERRCODE = 'SK001',
                      HINT = 'The database clock was set back, or snowflake_id_state was moved ahead. Retry later.';
        END IF;
        WHILE m > now_ms LOOP
            PERFORM pg_sleep((m - now_ms) / 1000.0);
            now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657;
        END LOOP;
        IF id IS NOT NULL THEN
            RETURN id;
        END IF;
    END LOOP;
END
$fn$
$create$, current_schema(), format('%I.%I', current_schema(), 'snowflake_id_state'),
    format('%I.%I', current_schema(), 'snowflake_id_seq'));

    -- The fast path, as one SQL expression so that the planner inlines it
    -- into the calling query, and folds snowflake_server_worker() into
    -- a constant once per plan. The state is read first: a simple CASE
    -- computes its operand before any WHEN. currval repeats this
    -- session's nextval.
    EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.snowflake_id() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $fn$
SELECT CASE pg_sequence_last_value(%2$L::regclass) >> 12
    WHEN nextval(%3$L::regclass) >> 12 THEN
        CASE currval(%3$L::regclass) >> 12
            WHEN ((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657) << 10)
                | %1$I.snowflake_server_worker()
            THEN currval(%3$L::regclass)
            ELSE %1$I.snowflake_id_slow()
        END
    ELSE %1$I.snowflake_id_slow()
END
$fn$
$create$, current_schema(), format('%I.%I', current_schema(), 'snowflake_id_state'),
    format('%I.%I', current_schema(), 'snowflake_id_seq'));
END
$migration$;
-- +goose StatementEnd

-- +goose Down

-- The functions of 00004_snowflake_id_fast_path.sql, as they were. A
-- number claimed for a server stays in snowflake_reserved_worker(), without
-- the check of where it runs.
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.snowflake_id_slow() RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $fn$
DECLARE
    w      bigint := %1$I.snowflake_reserved_worker();
    now_ms bigint;
    t      bigint;
    m      bigint;
    id     bigint;
BEGIN
    LOOP
        now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657;
        id := NULL;
        BEGIN
            -- Lock, then read the state: CASE evaluates its condition
            -- first. void IS NULL is false.
            t := CASE WHEN pg_advisory_xact_lock(8317708120493488433) IS NULL THEN NULL
                      ELSE pg_sequence_last_value(%2$L::regclass) END;
            IF t IS NULL THEN
                RAISE EXCEPTION 'snowflake_id: cannot read the state %%', %2$L
                    USING ERRCODE = '55000',
                          HINT = 'The state is set by the migration; this role needs USAGE and UPDATE on it.';
            END IF;
            m := t >> 22;
            IF m - now_ms > 1000 THEN
                NULL; -- the clock is far behind: refused below, nothing issued
            ELSIF m >= now_ms AND (t >> 12) & 1023 = w THEN
                -- The state's millisecond is now (or ahead, and waited for
                -- below): the next ID in it, unless it is spent.
                id := nextval(%3$L::regclass);
                IF id >> 12 <> t >> 12 THEN
                    id := NULL;
                    m := m + 1;
                END IF;
            ELSE
                m := GREATEST(now_ms, m + 1);
            END IF;
            IF id IS NULL AND m > t >> 22 THEN
                IF m > 2199023255551 THEN
                    RAISE EXCEPTION 'snowflake_id: the clock (%%) is past 2080-07-10T17:30:30.208Z, the last time the layout holds',
                        clock_timestamp() USING ERRCODE = 'SK002';
                END IF;
                -- A new millisecond: the sequence first, then the state.
                id := (m << 22) | (w << 12);
                t := setval(%3$L::regclass, id);
                t := setval(%2$L::regclass, id);
            END IF;
            RAISE SQLSTATE 'SK000';
        EXCEPTION WHEN SQLSTATE 'SK000' THEN
            -- The lock is released.
        END;
        IF m - now_ms > 1000 THEN
            RAISE EXCEPTION 'snowflake_id: the clock (%%) is %% ms behind the last ID issued; not waiting more than 1000 ms',
                clock_timestamp(), m - now_ms
                USING ERRCODE = 'SK001',
                      HINT = 'The database clock was set back, or snowflake_id_state was moved ahead. Retry later.';
        END IF;
        WHILE m > now_ms LOOP
            PERFORM pg_sleep((m - now_ms) / 1000.0);
            now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657;
        END LOOP;
        IF id IS NOT NULL THEN
            RETURN id;
        END IF;
    END LOOP;
END
$fn$
$create$, current_schema(), format('%I.%I', current_schema(), 'snowflake_id_state'),
    format('%I.%I', current_schema(), 'snowflake_id_seq'));

    -- The fast path, as one SQL expression so that the planner inlines it
    -- into the calling query, and folds snowflake_reserved_worker() into
    -- a constant once per plan. The state is read first: a simple CASE
    -- computes its operand before any WHEN. currval repeats this
    -- session's nextval.
    EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.snowflake_id() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $fn$
SELECT CASE pg_sequence_last_value(%2$L::regclass) >> 12
    WHEN nextval(%3$L::regclass) >> 12 THEN
        CASE currval(%3$L::regclass) >> 12
            WHEN ((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657) << 10)
                | %1$I.snowflake_reserved_worker()
            THEN currval(%3$L::regclass)
            ELSE %1$I.snowflake_id_slow()
        END
    ELSE %1$I.snowflake_id_slow()
END
$fn$
$create$, current_schema(), format('%I.%I', current_schema(), 'snowflake_id_state'),
    format('%I.%I', current_schema(), 'snowflake_id_seq'));
END
$migration$;
-- +goose StatementEnd

DROP FUNCTION snowflake_server_worker();
