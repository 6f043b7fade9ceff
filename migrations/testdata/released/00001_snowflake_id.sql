-- snowflake_id(): IDs made by PostgreSQL itself, for rows inserted by plain
-- SQL (`id bigint PRIMARY KEY DEFAULT snowflake_id()`), that decode with
-- idtype.DefaultLayout and never collide with the app's.
--
-- Layout, as idtype.DefaultLayout: 41 bits of milliseconds since
-- 2010-11-04T01:42:54.657Z (Unix ms 1288834974657), 10 bits of worker,
-- 12 bits of sequence. The worker is snowflake_reserved_worker(), 1023
-- unless changed with migrations.WithReservedWorker; no app generator may
-- lease that number, so the app's IDs and these differ in their worker
-- bits whatever the clocks say.
--
-- The rules, kept by the function below:
--   * Every ID is greater than every ID issued before it in this database,
--     whatever the sessions and transactions: the last millisecond and
--     sequence live in one sequence, snowflake_id_state, moved under a lock
--     by one caller at a time.
--   * A rolled-back transaction never hands its IDs out again: nextval and
--     setval are not transactional.
--   * When a millisecond's 4,096 IDs are spent, the next ID takes sequence
--     0 of the next millisecond and the call waits for the clock to reach
--     it: the sequence never wraps.
--   * Time never goes backwards: when the clock reads earlier than the last
--     ID (a clock set back), the call waits for it, at most 1 s, and fails
--     beyond that with SQLSTATE SK001. Nothing is issued then.

-- +goose Up

-- The worker number in every ID snowflake_id() makes. IMMUTABLE, so that
-- snowflake_id() folds it into a constant; CREATE OR REPLACE (done by
-- migrations.WithReservedWorker) invalidates that, in every session.
-- +goose StatementBegin
CREATE FUNCTION snowflake_reserved_worker() RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS 'SELECT 1023::bigint';
-- +goose StatementEnd

COMMENT ON FUNCTION snowflake_reserved_worker() IS
    'snowkey: the worker number of snowflake_id(); app generators must never lease it';

-- The state: (millisecond since the epoch << 12) | sequence of the last ID
-- issued. CACHE must stay 1: a session-local cache would hand out values
-- out of order.
CREATE SEQUENCE snowflake_id_state AS bigint MINVALUE 0 START WITH 0 CACHE 1 NO CYCLE;

COMMENT ON SEQUENCE snowflake_id_state IS
    'snowkey: state of snowflake_id(); never setval it backwards, never cache it';

-- The function names its sequence and helper with the schema this migration
-- runs in, so a caller with another search_path still reaches this state
-- (a SET search_path clause would do the same at twice the cost per call).
-- Hence the format(): %1$I is the schema, %2$L the sequence; %% is a
-- literal %, for RAISE.
--
-- The lock: pg_advisory_xact_lock(8317708120493488433) ('snowkey1') taken
-- in an inner block that then raises SK000 on purpose. The inner block is
-- a subtransaction, and rolling it back releases the lock at once, while
-- the sequence keeps its new value. A session-level lock would need an
-- unlock that an error (a cancel, a statement timeout) could skip, leaving
-- every other caller blocked; this one cannot leak. Holding it costs a few
-- microseconds; other callers queue behind it, never behind a transaction.
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($create$
CREATE FUNCTION %1$I.snowflake_id() RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $fn$
DECLARE
    now_ms bigint := floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - 1288834974657;
    state  bigint;
BEGIN
    BEGIN
        -- Lock, then take the next state: CASE evaluates its condition
        -- first. One expression, because PL/pgSQL evaluates it on its fast
        -- path, where a PERFORM of the lock would run a whole query
        -- (measured: 28%% less time per call). void IS NULL is false.
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
        -- The lock is released; state holds the ID's millisecond and sequence.
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

COMMENT ON FUNCTION snowflake_id() IS
    'snowkey: a snowflake ID in idtype.DefaultLayout with worker snowflake_reserved_worker()';

-- +goose Down

DROP FUNCTION snowflake_id();
DROP SEQUENCE snowflake_id_state;
DROP FUNCTION snowflake_reserved_worker();
