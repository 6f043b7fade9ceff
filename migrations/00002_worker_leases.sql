-- Worker-number leases of package idtype/workerid (workerid.Postgres).
--
-- One row per worker number that has ever been leased in a namespace. A
-- row outlives its leases: high_water keeps the last millisecond any owner
-- of the number may have issued an ID in, and the next owner issues
-- nothing at or before it, even with its clock set back.

-- +goose Up
CREATE TABLE snowkey_worker_leases (
    namespace   text        NOT NULL,
    worker      integer     NOT NULL CHECK (worker >= 0),
    -- The current owner's secret token; NULL when the number is free.
    owner       text,
    -- Who the owner is, for operators (host:pid by default).
    holder      text,
    -- The lease ends then, by the database clock; free after it.
    expires_at  timestamptz,
    -- Unix ms: no owner has issued, or may issue, an ID after it.
    high_water  bigint      NOT NULL DEFAULT 0,
    -- Unix ms: the high_water the current owner found; it issues nothing
    -- at or before it.
    start_after bigint,
    acquired_at timestamptz,
    renewed_at  timestamptz,
    PRIMARY KEY (namespace, worker)
);

-- +goose Down
DROP TABLE snowkey_worker_leases;
