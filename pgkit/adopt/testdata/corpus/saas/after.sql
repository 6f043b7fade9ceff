-- After adopting: a new tenant with snowflake keys, far above 2^31,
-- through every table, function, procedure, trigger, policy, view and the
-- materialized view; the app sees its own tenant's rows and only those;
-- the privileges as they were. A statement after "-- expect SQLSTATE"
-- must fail with it.

CREATE TEMP TABLE new_keys (name text PRIMARY KEY, id bigint NOT NULL);
CREATE FUNCTION pg_temp.k(text) RETURNS bigint LANGUAGE sql STABLE AS 'SELECT id FROM new_keys WHERE name = $1';

WITH x AS (INSERT INTO app.tenants (slug, settings) VALUES ('NewCo', 'theme => light') RETURNING id) INSERT INTO new_keys SELECT 'tenant', id FROM x;
WITH x AS (INSERT INTO app.users (tenant_id, email, name) VALUES (pg_temp.k('tenant'), 'Owner@NewCo.example', 'owner') RETURNING id)
	INSERT INTO new_keys SELECT 'user', id FROM x;
WITH x AS (INSERT INTO app.users (tenant_id, email, name) VALUES (pg_temp.k('tenant'), 'dev@newco.example', 'dev') RETURNING id)
	INSERT INTO new_keys SELECT 'user 2', id FROM x;
WITH x AS (INSERT INTO app.projects (tenant_id, owner_id, name) VALUES (pg_temp.k('tenant'), pg_temp.k('user'), 'launch') RETURNING id)
	INSERT INTO new_keys SELECT 'project', id FROM x;
WITH x AS (INSERT INTO app.tasks (tenant_id, project_id, assignee_id, title) VALUES (pg_temp.k('tenant'), pg_temp.k('project'), pg_temp.k('user'),
	'  ship it ') RETURNING id) INSERT INTO new_keys SELECT 'task', id FROM x;
DO $$ BEGIN ASSERT (SELECT title FROM app.tasks WHERE tenant_id = pg_temp.k('tenant') AND id = pg_temp.k('task')) = 'ship it', 'tidy_task'; END $$;
DO $$ BEGIN ASSERT (SELECT actor_id FROM app.audit_log WHERE action = 'task INSERT ' || pg_temp.k('task')) = pg_temp.k('user'), 'audit_task'; END $$;
WITH x AS (INSERT INTO app.resources (tenant_id, name) VALUES (pg_temp.k('tenant'), 'big room') RETURNING id)
	INSERT INTO new_keys SELECT 'resource', id FROM x;
INSERT INTO new_keys SELECT 'booking', app.book(pg_temp.k('tenant'), pg_temp.k('resource'), pg_temp.k('user'), now() + interval '1 day', 2);
-- The exclusion constraint, over keys: the room is taken.
-- expect 23P01
SELECT app.book(pg_temp.k('tenant'), pg_temp.k('resource'), pg_temp.k('user 2'), now() + interval '1 day 1 hour', 2);
WITH x AS (INSERT INTO app.bookings (tenant_id, resource_id, user_id, during) VALUES (pg_temp.k('tenant'), pg_temp.k('resource'),
	pg_temp.k('user 2'), tstzrange(now() + interval '3 days', now() + interval '3 days 1 hour')) RETURNING id)
	INSERT INTO new_keys SELECT 'booking 2', id FROM x;
WITH x AS (INSERT INTO app.audit_log (tenant_id, actor_id, action) VALUES (pg_temp.k('tenant'), pg_temp.k('user 2'), 'signed in') RETURNING id)
	INSERT INTO new_keys SELECT 'audit', id FROM x;
SELECT app.assign(pg_temp.k('tenant'), pg_temp.k('task'), pg_temp.k('user 2'));
DO $$ BEGIN ASSERT app.task_count(pg_temp.k('tenant'), pg_temp.k('project')) = 1, 'task_count'; END $$;
DO $$ BEGIN ASSERT (SELECT task_id FROM app.user_tasks(pg_temp.k('tenant'), pg_temp.k('user 2'))) = pg_temp.k('task'), 'user_tasks'; END $$;
CALL app.close_project(pg_temp.k('tenant'), pg_temp.k('project'));
DO $$ BEGIN ASSERT (SELECT done FROM app.tasks WHERE tenant_id = pg_temp.k('tenant') AND id = pg_temp.k('task')), 'close_project'; END $$;
INSERT INTO app.activity (tenant_id, user_id, kind) VALUES (pg_temp.k('tenant'), pg_temp.k('user'), 'launched');
REFRESH MATERIALIZED VIEW CONCURRENTLY app.project_stats;
DO $$ BEGIN ASSERT (SELECT done FROM app.project_stats WHERE tenant_id = pg_temp.k('tenant') AND project_id = pg_temp.k('project')) = 1,
	'project_stats'; END $$;
DO $$ BEGIN ASSERT (SELECT tasks FROM app.tenant_usage WHERE id = pg_temp.k('tenant')) = 1, 'tenant_usage'; END $$;

-- The app, as the new tenant: the policies, comparing keys as bigint.
SELECT set_config('app.tenant_id', pg_temp.k('tenant')::text, false);
SET ROLE {{app}};
DO $$ BEGIN ASSERT app.current_tenant() > 2147483647, 'current_tenant'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM app.tenants) = 1, 'tenants of the tenant'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM app.users) = 2, 'users of the tenant'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM app.tasks) = 1, 'tasks of the tenant'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM app.open_tasks) = 0, 'open tasks of the tenant'; END $$;
INSERT INTO app.tasks (tenant_id, project_id, title) SELECT tenant_id, id, 'second' FROM app.projects;
DO $$ BEGIN ASSERT (SELECT count(*) FROM app.open_tasks) = 1, 'the app''s own task'; END $$;
-- expect 42501
INSERT INTO app.tasks (tenant_id, project_id, title) VALUES (1, 3, 'not mine');
RESET ROLE;

-- Reporting reads usage and statistics, not the tasks.
SET ROLE {{reporting}};
SELECT count(*) FROM app.tenant_usage;
SELECT count(*) FROM app.project_stats;
-- expect 42501
SELECT count(*) FROM app.open_tasks;
RESET ROLE;
