-- The tables the queries of query.sql run on. snowkey's migrations
-- (migrations.Up) run first: they create snowflake_id(), which keys the
-- rows that SQL inserts without the app's generator.

-- A list of IDs as a query parameter: sqlc types a parameter by its cast
-- and applies no column override to it, so "ANY($1::bigint[])" would
-- take an []int64; a cast to this domain takes an sqltype.IDs (see the
-- db_type override in sqlc.yaml).
CREATE DOMAIN id_list AS bigint[];

CREATE TABLE authors (
    id   bigint PRIMARY KEY,
    name text NOT NULL
);

CREATE TABLE posts (
    id        bigint PRIMARY KEY,
    author_id bigint NOT NULL REFERENCES authors (id),
    reply_to  bigint REFERENCES posts (id),
    mentions  bigint[] NOT NULL DEFAULT '{}',
    body      text NOT NULL
);

CREATE TABLE post_events (
    id      bigint PRIMARY KEY DEFAULT snowflake_id(),
    post_id bigint NOT NULL REFERENCES posts (id),
    kind    text NOT NULL
);
