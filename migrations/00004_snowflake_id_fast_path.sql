-- snowflake_id() with a fast path of one nextval and no lock, for the rows
-- of bulk inserts. Its IDs and rules are those 00001_snowflake_id.sql
-- states; this file changes how they are kept.
--
-- The state is two sequences, both holding IDs in idtype.DefaultLayout:
--   * snowflake_id_state: the first ID of the millisecond being issued (its
--     millisecond and worker; the sequence field is 0, or 4095 when set as
--     a floor). Only a caller holding the lock changes it.
--   * snowflake_id_seq: the last ID issued. nextval gives the next one.
--
-- The fast path (snowflake_id(), plain SQL, inlined into the calling
-- query) reads snowflake_id_state, then takes nextval(snowflake_id_seq),
-- and keeps that value if both share their millisecond and worker and
-- those are the clock's millisecond and snowflake_reserved_worker(). In
-- every other case (the clock moved on, the millisecond's 4,096 IDs are
-- spent, the clock is behind, the worker changed) it calls
-- snowflake_id_slow(), which under the lock either takes the next ID of
-- the millisecond or starts a new millisecond M:
--     setval(snowflake_id_seq, M), then setval(snowflake_id_state, M)
-- where M's millisecond is after that of the old state.
--
-- Why a value kept by the fast path is unique: the state is read before
-- the nextval, and a value is kept only in the state's millisecond and
-- worker. Every value kept so far is therefore in a millisecond no later
-- than the state's, and a new millisecond starts after it, so the setval
-- that moves snowflake_id_seq (forwards, or backwards over values nobody
-- kept: those that ran past the end of a millisecond) never goes below a
-- kept value. A value taken after that setval but checked against the old
-- state is in another millisecond and is dropped; the state moves only
-- after snowflake_id_seq, so a caller that reads the new state takes its
-- value after the setval. Within a millisecond, nextval hands out each
-- value once and in order, so IDs also increase across sessions. A value
-- past sequence 4095 carries into the worker field and fails the check:
-- the sequence never wraps.
--
-- The lock (pg_advisory_xact_lock(8317708120493488433), 'snowkey1') is
-- taken and released in a subtransaction as before, only by
-- snowflake_id_slow(): about once a millisecond under a steady stream, at
-- every call when calls are further apart.

-- +goose Up

-- The old snowflake_id() changes its state under this lock: holding it
-- to the end of the migration, no old call is between its nextval and
-- setval while the state is converted. An old call that starts after
-- the migration reads the converted state as a time far ahead of the
-- clock and refuses (SQLSTATE SK001), issuing nothing.
SELECT pg_advisory_xact_lock(8317708120493488433);

CREATE SEQUENCE snowflake_id_seq AS bigint MINVALUE 0 START WITH 0 CACHE 1 NO CYCLE;

COMMENT ON SEQUENCE snowflake_id_seq IS
    'snowkey: the last ID snowflake_id() issued; never setval it, never cache it';

-- Convert the state, (millisecond << 12) | sequence of the last ID, to
-- the greatest ID of that millisecond: the next ID is in a later one.
SELECT setval('snowflake_id_state', (last_value >> 12 << 22) | 4194303) FROM snowflake_id_state;
SELECT setval('snowflake_id_seq', last_value) FROM snowflake_id_state;

COMMENT ON SEQUENCE snowflake_id_state IS
    'snowkey: the first ID of the millisecond snowflake_id() issues in; never setval it backwards, never cache it';

-- The functions name their sequences and helpers with the schema this
-- migration runs in, as 00001 does: %1$I is the schema, %2$L the state,
-- %3$L snowflake_id_seq; %% is a literal %, for RAISE.
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($create$
CREATE FUNCTION %1$I.snowflake_id_slow() RETURNS bigint
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

COMMENT ON FUNCTION snowflake_id_slow() IS
    'snowkey: the part of snowflake_id() that starts a millisecond or waits for the clock, under a lock';

-- +goose Down

-- As in Up: no new call is between its setvals while the state goes back.
SELECT pg_advisory_xact_lock(8317708120493488433);

-- Back to (millisecond << 12) | sequence, at the end of the last
-- millisecond either sequence holds.
SELECT setval('snowflake_id_state',
    (GREATEST(s.last_value, q.last_value) >> 22 << 12) | 4095)
    FROM snowflake_id_state s, snowflake_id_seq q;

COMMENT ON SEQUENCE snowflake_id_state IS
    'snowkey: state of snowflake_id(); never setval it backwards, never cache it';

-- The function of 00001_snowflake_id.sql, as it was.
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($create$
CREATE OR REPLACE FUNCTION %1$I.snowflake_id() RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $fn$
DECLARE
    now_ms bigint := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657;
    state  bigint;
BEGIN
    BEGIN
        state := CASE WHEN pg_advisory_xact_lock(8317708120493488433) IS NULL THEN NULL
                      ELSE nextval(%2$L) END;
        IF state >> 12 < now_ms THEN
            IF now_ms > 2199023255551 THEN
                RAISE EXCEPTION 'snowflake_id: the clock (%%) is past 2080-07-10T17:30:30.208Z, the last time the layout holds',
                    clock_timestamp() USING ERRCODE = 'SK002';
            END IF;
            state := setval(%2$L, now_ms << 12);
        END IF;
        RAISE SQLSTATE 'SK000';
    EXCEPTION WHEN SQLSTATE 'SK000' THEN
    END;
    WHILE state >> 12 > now_ms LOOP
        IF (state >> 12) - now_ms > 1000 THEN
            RAISE EXCEPTION 'snowflake_id: the clock (%%) is %% ms behind the last ID issued; not waiting more than 1000 ms',
                clock_timestamp(), (state >> 12) - now_ms
                USING ERRCODE = 'SK001',
                      HINT = 'The database clock was set back, or snowflake_id_state was moved ahead. Retry later.';
        END IF;
        PERFORM pg_sleep(((state >> 12) - now_ms) / 1000.0);
        now_ms := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657;
    END LOOP;
    RETURN ((state >> 12) << 22) | (%1$I.snowflake_reserved_worker() << 12) | (state & 4095);
END
$fn$
$create$, current_schema(), format('%I.%I', current_schema(), 'snowflake_id_state'));
END
$migration$;
-- +goose StatementEnd

DROP FUNCTION snowflake_id_slow();
DROP SEQUENCE snowflake_id_seq;
