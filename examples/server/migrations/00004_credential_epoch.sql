-- Credential epochs: every password change raises the user's epoch with
-- the hash, in one statement, and a login hands out its session and its
-- device cookie only for the epoch whose password it checked, so nothing
-- the old password started outlives the change (see startSession).

-- +goose Up
ALTER TABLE users ADD COLUMN credential_epoch bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE users DROP COLUMN credential_epoch;
