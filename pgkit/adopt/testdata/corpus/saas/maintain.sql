-- After adopting: what users did, keyed by snowflakes and partitioned by
-- the time in its keys (pgkit/partition maintains it), referring to the
-- adopted composite keys of users.
SET ROLE {{owner}};
CREATE TABLE app.activity (
	id bigint NOT NULL DEFAULT snowflake_id(),
	tenant_id bigint NOT NULL,
	user_id bigint NOT NULL,
	kind text NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY (tenant_id, user_id) REFERENCES app.users
) PARTITION BY RANGE (id);
GRANT INSERT, SELECT ON app.activity TO {{app}};
RESET ROLE;
