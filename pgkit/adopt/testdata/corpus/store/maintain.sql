-- After adopting: a table keyed by snowflakes, partitioned by the time in
-- its keys (pgkit/partition maintains it), that refers to adopted keys.
SET ROLE {{owner}};
CREATE TABLE rental_events (
	id bigint NOT NULL DEFAULT snowflake_id(),
	rental_id bigint NOT NULL REFERENCES rentals,
	kind text NOT NULL,
	PRIMARY KEY (id)
) PARTITION BY RANGE (id);
RESET ROLE;
