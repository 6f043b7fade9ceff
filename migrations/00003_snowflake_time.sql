-- The time lives in the key: functions that take a snowflake ID apart, and
-- the first ID of a time, so that SQL can cut a table by time on its key
-- alone (WHERE id >= snowflake_first_id(...)), index or partition by it,
-- and show when a row was made without a created_at column.
--
--   snowflake_time(id)         timestamptz: when the ID was issued, to the ms
--   snowflake_worker(id)       bigint: the worker number that issued it
--   snowflake_sequence(id)     bigint: its place in the worker's millisecond
--   snowflake_first_id(t)      bigint: the smallest ID of the millisecond of
--                              t, as idtype.Layout.FirstID: 0 before the
--                              epoch, 9223372036854775807 past the last time
--
-- Each decodes with idtype.DefaultLayout (41/10/12 bits, epoch Unix ms
-- 1288834974657), and each has a variant for any layout that takes it as
-- three more arguments, as idtype.Layout holds it: (epoch timestamptz,
-- worker_bits integer, sequence_bits integer), e.g.
-- snowflake_time(id, '2020-01-01T00:00:00Z', 10, 12).
--
-- All are IMMUTABLE (a layout never changes once IDs exist), so they may
-- be used in index expressions, generated columns and partition bounds,
-- and they are plain SQL expressions that the planner inlines into the
-- calling query, so they cost what their arithmetic costs. They agree with
-- idtype on every ID, including both ends of the layout.
--
-- What they refuse, with an error instead of a meaningless answer:
--   * An ID of 0 or less (SQLSTATE SK003): 0 means "not assigned yet" and
--     no snowflake is negative. NULL gives NULL.
--   * A layout that idtype.Layout.Validate refuses (SQLSTATE SK004): a
--     width over 31 bits, fewer than 20 time bits, an epoch before 1970.
--     (Validate also refuses an epoch in the future; an IMMUTABLE function
--     cannot look at the clock, so that check is left to the app.)

-- +goose Up

-- snowflake_refuse() raises the error that the functions below owe their
-- caller for a bad layout (checked first) or a bad ID, and returns NULL
-- when an argument is NULL. They call it from the ELSE branch of a CASE,
-- so it runs only on bad input; it is PL/pgSQL because an SQL expression
-- cannot raise an error. IMMUTABLE like them, or the planner would not
-- inline them.
-- +goose StatementBegin
CREATE FUNCTION snowflake_refuse(id bigint, epoch timestamptz, worker_bits integer, sequence_bits integer)
    RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
BEGIN
    IF epoch IS NULL OR worker_bits IS NULL OR sequence_bits IS NULL THEN
        RETURN NULL;
    END IF;
    IF worker_bits NOT BETWEEN 0 AND 31 OR sequence_bits NOT BETWEEN 0 AND 31 THEN
        RAISE EXCEPTION 'snowflake: layout with % worker bits and % sequence bits: each width must be 0..31',
            worker_bits, sequence_bits USING ERRCODE = 'SK004';
    END IF;
    IF worker_bits + sequence_bits > 43 THEN
        RAISE EXCEPTION 'snowflake: layout with % worker bits and % sequence bits leaves % time bits, fewer than 20',
            worker_bits, sequence_bits, 63 - worker_bits - sequence_bits USING ERRCODE = 'SK004';
    END IF;
    IF NOT (epoch >= timestamptz '1970-01-01 00:00:00+00') THEN
        RAISE EXCEPTION 'snowflake: layout epoch % is before 1970-01-01T00:00:00Z', epoch USING ERRCODE = 'SK004';
    END IF;
    IF id IS NULL THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'snowflake: % is not a snowflake ID', id
        USING ERRCODE = 'SK003',
              HINT = 'Snowflake IDs are positive; 0 means "not assigned yet".';
END
$fn$;
-- +goose StatementEnd

COMMENT ON FUNCTION snowflake_refuse(bigint, timestamptz, integer, integer) IS
    'snowkey: raises the error of snowflake_time() and the others for a bad ID or layout';

-- The functions name snowflake_refuse() with the schema this migration runs
-- in, as snowflake_id() names its state, so that a caller with another
-- search_path still reaches it: %1$I is the schema. (A SET search_path
-- clause would keep the planner from inlining them.)
--
-- How the time is computed, and why it is exact:
--   * Default layout: to_timestamp(ms / 1000.0) in float8, the one
--     IMMUTABLE way from a number to a timestamptz, and the fastest.
--     to_timestamp computes rint((s - 946684800) * 1e6) microseconds; for
--     every time this layout holds (s < 2^32, so before 2106) the two
--     roundings on the way err by at most 0.24 + 0.25 us, so rint lands on
--     the exact millisecond. The tests check both ends of the layout.
--   * Any layout: the same bound does not hold for every epoch and width,
--     so the time is built from whole days and the milliseconds left over,
--     each exact in an interval, on a timestamp (IMMUTABLE, unlike
--     timestamptz + interval), then read as UTC: exact up to PostgreSQL's
--     last timestamp.
--   * A time's millisecond: floor(extract(epoch ...) * 1000) in numeric,
--     exact to the microsecond, rounded down as Go's UnixMilli does.
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($create$
CREATE FUNCTION snowflake_time(id bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT to_timestamp((((CASE WHEN id > 0 THEN id
                            ELSE %1$I.snowflake_refuse(id, timestamptz '2010-11-04 01:42:54.657+00', 10, 12) END)
                      >> 22) + 1288834974657)::float8 / 1000)
$fn$;

CREATE FUNCTION snowflake_worker(id bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT ((CASE WHEN id > 0 THEN id
              ELSE %1$I.snowflake_refuse(id, timestamptz '2010-11-04 01:42:54.657+00', 10, 12) END) >> 12) & 1023
$fn$;

CREATE FUNCTION snowflake_sequence(id bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT (CASE WHEN id > 0 THEN id
             ELSE %1$I.snowflake_refuse(id, timestamptz '2010-11-04 01:42:54.657+00', 10, 12) END) & 4095
$fn$;

CREATE FUNCTION snowflake_first_id(t timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT CASE WHEN NOT isfinite(t) THEN CASE WHEN t > timestamptz '1970-01-01 00:00:00+00' THEN 9223372036854775807 ELSE 0 END
            WHEN t < timestamptz '2010-11-04 01:42:54.657+00' THEN 0
            WHEN t >= timestamptz '2080-07-10 17:30:30.209+00' THEN 9223372036854775807
            ELSE (floor(extract(epoch FROM timezone('UTC', t)) * 1000)::bigint - 1288834974657) << 22
       END
$fn$;

CREATE FUNCTION snowflake_time(id bigint, epoch timestamptz, worker_bits integer, sequence_bits integer)
    RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT timezone('UTC', timestamp '1970-01-01 00:00:00'
        + ((((CASE WHEN id > 0 AND worker_bits BETWEEN 0 AND 31 AND sequence_bits BETWEEN 0 AND 31
                        AND worker_bits + sequence_bits <= 43 AND epoch >= timestamptz '1970-01-01 00:00:00+00' THEN id
                   ELSE %1$I.snowflake_refuse(id, epoch, worker_bits, sequence_bits) END) >> (worker_bits + sequence_bits))
            + floor(extract(epoch FROM timezone('UTC', epoch)) * 1000)::bigint) / 86400000) * interval '1 day'
        + ((((CASE WHEN id > 0 THEN id ELSE 0 END) >> (worker_bits + sequence_bits))
            + floor(extract(epoch FROM timezone('UTC', epoch)) * 1000)::bigint) %% 86400000) * interval '1 millisecond')
$fn$;

CREATE FUNCTION snowflake_worker(id bigint, epoch timestamptz, worker_bits integer, sequence_bits integer)
    RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT ((CASE WHEN id > 0 AND worker_bits BETWEEN 0 AND 31 AND sequence_bits BETWEEN 0 AND 31
                   AND worker_bits + sequence_bits <= 43 AND epoch >= timestamptz '1970-01-01 00:00:00+00' THEN id
              ELSE %1$I.snowflake_refuse(id, epoch, worker_bits, sequence_bits) END) >> sequence_bits)
       & ((1::bigint << worker_bits) - 1)
$fn$;

CREATE FUNCTION snowflake_sequence(id bigint, epoch timestamptz, worker_bits integer, sequence_bits integer)
    RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT (CASE WHEN id > 0 AND worker_bits BETWEEN 0 AND 31 AND sequence_bits BETWEEN 0 AND 31
                  AND worker_bits + sequence_bits <= 43 AND epoch >= timestamptz '1970-01-01 00:00:00+00' THEN id
             ELSE %1$I.snowflake_refuse(id, epoch, worker_bits, sequence_bits) END)
       & ((1::bigint << sequence_bits) - 1)
$fn$;

CREATE FUNCTION snowflake_first_id(t timestamptz, epoch timestamptz, worker_bits integer, sequence_bits integer)
    RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
SELECT CASE WHEN NOT (worker_bits BETWEEN 0 AND 31 AND sequence_bits BETWEEN 0 AND 31
                      AND worker_bits + sequence_bits <= 43 AND epoch >= timestamptz '1970-01-01 00:00:00+00')
                 THEN %1$I.snowflake_refuse(1, epoch, worker_bits, sequence_bits)
            WHEN NOT isfinite(t) THEN CASE WHEN t > epoch THEN 9223372036854775807 ELSE 0 END
            WHEN floor(extract(epoch FROM timezone('UTC', t)) * 1000)::bigint
                 < floor(extract(epoch FROM timezone('UTC', epoch)) * 1000)::bigint THEN 0
            WHEN floor(extract(epoch FROM timezone('UTC', t)) * 1000)::bigint
                 - floor(extract(epoch FROM timezone('UTC', epoch)) * 1000)::bigint
                 > (1::bigint << (63 - worker_bits - sequence_bits)) - 1 THEN 9223372036854775807
            ELSE (floor(extract(epoch FROM timezone('UTC', t)) * 1000)::bigint
                  - floor(extract(epoch FROM timezone('UTC', epoch)) * 1000)::bigint) << (worker_bits + sequence_bits)
       END
$fn$;
$create$, current_schema());
END
$migration$;
-- +goose StatementEnd

COMMENT ON FUNCTION snowflake_time(bigint) IS
    'snowkey: when a snowflake ID of idtype.DefaultLayout was issued';
COMMENT ON FUNCTION snowflake_worker(bigint) IS
    'snowkey: the worker number of a snowflake ID of idtype.DefaultLayout';
COMMENT ON FUNCTION snowflake_sequence(bigint) IS
    'snowkey: the sequence number of a snowflake ID of idtype.DefaultLayout';
COMMENT ON FUNCTION snowflake_first_id(timestamptz) IS
    'snowkey: the smallest snowflake ID of idtype.DefaultLayout in the millisecond of t (idtype.Layout.FirstID)';
COMMENT ON FUNCTION snowflake_time(bigint, timestamptz, integer, integer) IS
    'snowkey: when a snowflake ID of the layout (epoch, worker bits, sequence bits) was issued';
COMMENT ON FUNCTION snowflake_worker(bigint, timestamptz, integer, integer) IS
    'snowkey: the worker number of a snowflake ID of the layout (epoch, worker bits, sequence bits)';
COMMENT ON FUNCTION snowflake_sequence(bigint, timestamptz, integer, integer) IS
    'snowkey: the sequence number of a snowflake ID of the layout (epoch, worker bits, sequence bits)';
COMMENT ON FUNCTION snowflake_first_id(timestamptz, timestamptz, integer, integer) IS
    'snowkey: the smallest snowflake ID of the layout (epoch, worker bits, sequence bits) in the millisecond of t';

-- +goose Down

DROP FUNCTION snowflake_first_id(timestamptz, timestamptz, integer, integer);
DROP FUNCTION snowflake_sequence(bigint, timestamptz, integer, integer);
DROP FUNCTION snowflake_worker(bigint, timestamptz, integer, integer);
DROP FUNCTION snowflake_time(bigint, timestamptz, integer, integer);
DROP FUNCTION snowflake_first_id(timestamptz);
DROP FUNCTION snowflake_sequence(bigint);
DROP FUNCTION snowflake_worker(bigint);
DROP FUNCTION snowflake_time(bigint);
DROP FUNCTION snowflake_refuse(bigint, timestamptz, integer, integer);
