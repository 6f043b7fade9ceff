-- Public display names: posts show their author by name, never by email,
-- which any signed-in user could otherwise read. Accounts made before
-- this migration have an empty name until they set one.

-- +goose Up
ALTER TABLE users ADD COLUMN name varchar(50) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE users DROP COLUMN name;
