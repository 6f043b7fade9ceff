-- After adopting: new rows with snowflake keys through every table,
-- function, procedure, trigger, view and materialized view, and the
-- privileges as they were. Each statement must succeed, but one after
-- "-- expect SQLSTATE", which must fail with that SQLSTATE. new_keys
-- keeps the keys made; pg_temp.k(name) reads one.

CREATE TEMP TABLE new_keys (name text PRIMARY KEY, id bigint NOT NULL);
CREATE FUNCTION pg_temp.k(text) RETURNS bigint LANGUAGE sql STABLE AS 'SELECT id FROM new_keys WHERE name = $1';

WITH x AS (INSERT INTO countries (name) VALUES ('Dunland') RETURNING id) INSERT INTO new_keys SELECT 'country', id FROM x;
WITH x AS (INSERT INTO cities (country_id, name) VALUES (pg_temp.k('country'), 'Tharbad') RETURNING id)
	INSERT INTO new_keys SELECT 'city', id FROM x;
WITH x AS (INSERT INTO addresses (city_id, line) VALUES (pg_temp.k('city'), '1 Ford Road') RETURNING id)
	INSERT INTO new_keys SELECT 'address', id FROM x;

-- A store and its manager, who refer to each other: one transaction.
BEGIN;
INSERT INTO new_keys SELECT 'store', snowflake_id();
INSERT INTO new_keys SELECT 'manager', snowflake_id();
INSERT INTO stores (id, manager_id, address_id, opened) VALUES (pg_temp.k('store'), pg_temp.k('manager'), pg_temp.k('address'), current_date);
INSERT INTO staff (id, store_id, name, email) VALUES (pg_temp.k('manager'), pg_temp.k('store'), 'Dee', 'Dee@Store.example');
COMMIT;

WITH x AS (INSERT INTO customers (store_id, name, email, address_id) VALUES (pg_temp.k('store'), 'Eve', 'EVE@Mail.example', pg_temp.k('address'))
	RETURNING id) INSERT INTO new_keys SELECT 'customer', id FROM x;
WITH x AS (INSERT INTO films (title, released, rental_days) VALUES ('The New Key', 2025, 2) RETURNING id) INSERT INTO new_keys SELECT 'film', id FROM x;
WITH x AS (INSERT INTO categories (name) VALUES ('Documentary') RETURNING id) INSERT INTO new_keys SELECT 'category', id FROM x;
INSERT INTO film_category VALUES (pg_temp.k('film'), pg_temp.k('category'));
WITH x AS (INSERT INTO inventory (film_id, store_id) VALUES (pg_temp.k('film'), pg_temp.k('store')) RETURNING id)
	INSERT INTO new_keys SELECT 'inventory', id FROM x;
WITH x AS (INSERT INTO inventory (film_id, store_id) VALUES (pg_temp.k('film'), pg_temp.k('store')) RETURNING id)
	INSERT INTO new_keys SELECT 'inventory 2', id FROM x;

-- The triggers: stamped, e-mail lowered, full text, last update.
DO $$ BEGIN ASSERT (SELECT email FROM customers WHERE id = pg_temp.k('customer')) = 'eve@mail.example', 'stamp_customer'; END $$;
DO $$ BEGIN ASSERT (SELECT search @@ to_tsquery('english', 'key') FROM films WHERE id = pg_temp.k('film')), 'films_search'; END $$;
UPDATE films SET rental_rate = 2.00 WHERE id = pg_temp.k('film');
DO $$ BEGIN ASSERT (SELECT late_fee FROM films WHERE id = pg_temp.k('film')) = 1.00, 'generated late_fee'; END $$;

-- The functions and the procedure, with the new keys.
DO $$ BEGIN ASSERT inventory_in_stock(pg_temp.k('inventory')), 'new inventory in stock'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM film_in_stock(pg_temp.k('film'), pg_temp.k('store')) WHERE p_film_count = pg_temp.k('inventory')) = 1,
	'film_in_stock'; END $$;
CALL rent_film(pg_temp.k('inventory'), pg_temp.k('customer'), pg_temp.k('manager'), NULL);
INSERT INTO new_keys SELECT 'rental', id FROM rentals WHERE customer_id = pg_temp.k('customer');
DO $$ BEGIN ASSERT NOT inventory_in_stock(pg_temp.k('inventory')), 'rented inventory out of stock'; END $$;
DO $$ BEGIN ASSERT (SELECT rentals FROM rental_stats WHERE day = current_date) >= 1, 'count_rentals'; END $$;
-- The constraint trigger refuses a rental by an inactive customer, at commit.
UPDATE customers SET active = false WHERE id = pg_temp.k('customer');
-- expect P0001
INSERT INTO rentals (inventory_id, customer_id, staff_id) VALUES (pg_temp.k('inventory 2'), pg_temp.k('customer'), pg_temp.k('manager'));
UPDATE customers SET active = true WHERE id = pg_temp.k('customer');
DO $$ BEGIN ASSERT (SELECT updated_at > created_at FROM customers WHERE id = pg_temp.k('customer')), 'last_updated'; END $$;

WITH x AS (INSERT INTO payments (customer_id, staff_id, rental_id, amount, paid_at)
	VALUES (pg_temp.k('customer'), pg_temp.k('manager'), pg_temp.k('rental'), 4.99, '2025-06-01') RETURNING id)
	INSERT INTO new_keys SELECT 'payment 2025', id FROM x;
WITH x AS (INSERT INTO payments (customer_id, staff_id, rental_id, amount, paid_at)
	VALUES (pg_temp.k('customer'), pg_temp.k('manager'), pg_temp.k('rental'), 1.00, now()) RETURNING id)
	INSERT INTO new_keys SELECT 'payment now', id FROM x;
DO $$ BEGIN ASSERT customer_balance(pg_temp.k('customer'), now()) IS NOT NULL, 'customer_balance'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM rewards_report(1, 0) WHERE id = pg_temp.k('customer')) = 1, 'rewards_report'; END $$;
DO $$ BEGIN ASSERT film_rentals(pg_temp.k('film')) = 1, 'film_rentals'; END $$;
DO $$ BEGIN ASSERT due_date('2025-01-01 00:00Z', 3) = '2025-01-04 00:00Z', 'due_date'; END $$;

-- Notes keep their serial keys (a table with inheritance children is
-- not adopted), and refer to the new keys.
INSERT INTO customer_notes (author_id, customer_id, body) VALUES (pg_temp.k('manager'), pg_temp.k('customer'), 'new');
INSERT INTO film_notes (author_id, film_id, body) VALUES (pg_temp.k('manager'), pg_temp.k('film'), 'new');
INSERT INTO rental_events (rental_id, kind) VALUES (pg_temp.k('rental'), 'rented');

-- The views and materialized views show the new rows.
DO $$ BEGIN ASSERT (SELECT city FROM customer_list WHERE id = pg_temp.k('customer')) = 'Tharbad', 'customer_list'; END $$;
DO $$ BEGIN ASSERT (SELECT categories FROM film_list WHERE id = pg_temp.k('film')) = 'Documentary', 'film_list'; END $$;
DO $$ BEGIN ASSERT (SELECT store_id FROM staff_list WHERE id = pg_temp.k('manager')) = pg_temp.k('store'), 'staff_list'; END $$;
DO $$ BEGIN ASSERT (SELECT total FROM sales_by_store WHERE store_id = pg_temp.k('store')) = 5.99, 'sales_by_store'; END $$;
DO $$ BEGIN ASSERT (SELECT count(*) FROM overdue) > 0, 'overdue'; END $$;
REFRESH MATERIALIZED VIEW CONCURRENTLY sales_by_category;
REFRESH MATERIALIZED VIEW CONCURRENTLY customer_totals;
DO $$ BEGIN ASSERT (SELECT total FROM sales_by_category WHERE category = 'Documentary') = 5.99, 'sales_by_category'; END $$;
DO $$ BEGIN ASSERT (SELECT payments FROM customer_totals WHERE customer_id = pg_temp.k('customer')) = 2, 'customer_totals'; END $$;

-- Privileges as they were: reporting reads the reports, not staff_list;
-- the app may run customer_balance, reporting may not.
SET ROLE {{reporting}};
SELECT count(*) FROM customer_list;
SELECT count(*) FROM sales_by_category;
-- expect 42501
SELECT count(*) FROM staff_list;
-- expect 42501
SELECT customer_balance(1, now());
RESET ROLE;
SET ROLE {{app}};
SELECT customer_balance(1, now());
-- expect 42501
SELECT count(*) FROM staff_list;
RESET ROLE;
