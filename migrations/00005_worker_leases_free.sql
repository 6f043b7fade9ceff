-- Free worker numbers of package idtype/workerid, found through an index.
--
-- A free row (a number given back, or made ahead and never leased) has
-- expires_at '-infinity'; a lapsed lease has expires_at in the past. The
-- index finds either in O(log n), so that a take never scans the
-- namespace. A namespace's rows are made at its first take, every
-- number's (workerid's pgMakeRows); this gives every number below the
-- highest that has a row one too, as the namespaces of earlier versions
-- get here.

-- +goose Up
UPDATE snowkey_worker_leases SET expires_at = '-infinity' WHERE expires_at IS NULL;
ALTER TABLE snowkey_worker_leases ALTER COLUMN expires_at SET DEFAULT '-infinity';
INSERT INTO snowkey_worker_leases (namespace, worker, expires_at, high_water)
SELECT m.namespace, g, '-infinity', 0
FROM (SELECT namespace, max(worker) AS top FROM snowkey_worker_leases GROUP BY namespace) AS m,
    generate_series(0, m.top) AS g
ON CONFLICT DO NOTHING;
CREATE INDEX snowkey_worker_leases_free ON snowkey_worker_leases (namespace, expires_at, worker);

-- +goose Down
DROP INDEX snowkey_worker_leases_free;
ALTER TABLE snowkey_worker_leases ALTER COLUMN expires_at DROP DEFAULT;
UPDATE snowkey_worker_leases SET expires_at = NULL WHERE expires_at = '-infinity';
