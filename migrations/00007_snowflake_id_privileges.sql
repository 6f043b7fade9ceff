-- Who may call snowflake_id(), and who may move its state: every role
-- that may EXECUTE snowflake_id() (PUBLIC, as for every function, unless
-- the operator revokes it) calls it with no grant on the sequences of
-- 00001 and 00004, and no role but their owner may move them, which is
-- what keeps its IDs from repeating. Its IDs and rules are those of
-- 00001_snowflake_id.sql, 00004_snowflake_id_fast_path.sql and
-- 00006_snowflake_server_worker.sql; this file changes privileges and the
-- role snowflake_id_slow() runs as.
--
-- What a call needs, and from whom:
--   * snowflake_id(), the fast path, is inlined into the calling query and
--     runs as the caller. It reads snowflake_id_state
--     (pg_sequence_last_value, which SELECT allows) and takes nextval and
--     currval of snowflake_id_seq (USAGE). PUBLIC gets those two
--     privileges, which move nothing back: SELECT only reads the state,
--     and a value of snowflake_id_seq taken outside snowflake_id() is one
--     no ID is made of (the fast path keeps a value only in the state's
--     millisecond and worker, and a new millisecond starts after every
--     kept value), as if a call had thrown its ID away. setval needs
--     UPDATE, which no role but the owner has.
--   * snowflake_id_slow() starts a millisecond with setval, so it runs as
--     its owner (SECURITY DEFINER). Its search_path is pinned to
--     pg_catalog, then pg_temp last: it names every object of snowkey's
--     with its schema, so that no name it uses resolves in the caller's
--     search_path, nor in a schema where other roles may create objects
--     (public, before PostgreSQL 15), where a function of the caller's
--     would otherwise run with the owner's privileges. Everything it calls
--     (snowflake_server_worker() and the functions that checks) runs under
--     the same path, as the owner.
--   * snowflake_id() itself stays SECURITY INVOKER: PostgreSQL never
--     inlines a SECURITY DEFINER function, and one whose search_path is
--     set at every call costs several times what the whole fast path
--     costs, once per ID.
--
-- The functions that snowflake_id() and the time functions call
-- (snowflake_id_slow(), snowflake_server_worker(),
-- snowflake_reserved_worker(), snowflake_refuse()) are granted to PUBLIC,
-- so that EXECUTE on the function a role calls is all it needs, also where
-- ALTER DEFAULT PRIVILEGES took EXECUTE on new functions from PUBLIC. Each
-- issues IDs as snowflake_id() does, returns a number, or raises an error.
--
-- Roles granted more than that on the sequences (by ALTER DEFAULT
-- PRIVILEGES, or as earlier versions' docs said: USAGE and UPDATE on
-- both) lose what moves the state: UPDATE on both, and USAGE (nextval) on
-- snowflake_id_state. What they may still do is what PUBLIC may.

-- +goose Up

-- %1$I is the schema this migration runs in.
-- +goose StatementBegin
DO $migration$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT format('%I.%I', n.nspname, c.relname) AS seq, a.privilege_type AS priv,
            CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS grantee
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        CROSS JOIN LATERAL aclexplode(c.relacl) AS a
        WHERE n.nspname = current_schema() AND c.relname IN ('snowflake_id_state', 'snowflake_id_seq')
            AND a.grantee <> c.relowner
            AND (a.privilege_type = 'UPDATE' OR a.privilege_type = 'USAGE' AND c.relname = 'snowflake_id_state')
    LOOP
        EXECUTE format('REVOKE %s ON SEQUENCE %s FROM %s CASCADE', r.priv, r.seq, r.grantee);
    END LOOP;

    EXECUTE format($grant$
GRANT SELECT ON SEQUENCE %1$I.snowflake_id_state TO PUBLIC;
GRANT USAGE ON SEQUENCE %1$I.snowflake_id_seq TO PUBLIC;
ALTER FUNCTION %1$I.snowflake_id_slow() SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp;
GRANT EXECUTE ON FUNCTION %1$I.snowflake_id_slow(), %1$I.snowflake_server_worker(),
    %1$I.snowflake_reserved_worker(), %1$I.snowflake_refuse(bigint, timestamptz, integer, integer) TO PUBLIC;
$grant$, current_schema());
END
$migration$;
-- +goose StatementEnd

COMMENT ON FUNCTION snowflake_id_slow() IS
    'snowkey: the part of snowflake_id() that starts a millisecond or waits for the clock, under a lock; runs as its owner, who alone may move the state';

-- +goose Down

-- What roles were granted before is not given back: it let them move
-- the state.
-- +goose StatementBegin
DO $migration$
BEGIN
    EXECUTE format($revoke$
ALTER FUNCTION %1$I.snowflake_id_slow() SECURITY INVOKER RESET search_path;
REVOKE SELECT ON SEQUENCE %1$I.snowflake_id_state FROM PUBLIC;
REVOKE USAGE ON SEQUENCE %1$I.snowflake_id_seq FROM PUBLIC;
$revoke$, current_schema());
END
$migration$;
-- +goose StatementEnd

COMMENT ON FUNCTION snowflake_id_slow() IS
    'snowkey: the part of snowflake_id() that starts a millisecond or waits for the clock, under a lock';
