-- A rental store, as written for 32-bit keys: serial and smallserial
-- keys, stores and staff that refer to each other (a cycle, deferred),
-- payments partitioned by date whose partitions declare their own foreign
-- keys, notes in an inheritance tree, full-text and last-update triggers,
-- a statement trigger and a constraint trigger, domains, a generated
-- column, views (one on another) and materialized views, SQL and PL/pgSQL
-- functions and a procedure that take keys as integer, a publication,
-- and citext and pg_trgm. Written for snowkey's tests.
--
-- {{owner}}, {{app}} and {{reporting}} are roles the test makes: the
-- owner of everything (no superuser), the app's, and a reporting role.

CREATE EXTENSION IF NOT EXISTS citext;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
GRANT CREATE ON SCHEMA public TO {{owner}};
-- EXECUTE on snowflake_id(), which PUBLIC has unless an operator took it
-- away: adopt refuses to make it the default of tables that a role
-- without it inserts into.
GRANT EXECUTE ON FUNCTION snowflake_id() TO {{owner}}, {{app}};
SET ROLE {{owner}};

CREATE DOMAIN year_t AS integer CHECK (VALUE BETWEEN 1888 AND 2155);
CREATE DOMAIN store_ref AS integer NOT NULL CHECK (VALUE > 0);
COMMENT ON DOMAIN store_ref IS 'a store every row belongs to';
CREATE TYPE rating_t AS ENUM ('G', 'PG', 'PG-13', 'R', 'NC-17');

CREATE TABLE countries (id smallserial PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE cities (id serial PRIMARY KEY, country_id smallint NOT NULL REFERENCES countries, name text NOT NULL);
CREATE TABLE addresses (id serial PRIMARY KEY, city_id int NOT NULL REFERENCES cities, line text NOT NULL, postal_code text);

CREATE TABLE stores (id serial PRIMARY KEY, manager_id int NOT NULL, address_id int NOT NULL REFERENCES addresses, opened date);
CREATE TABLE staff (
	id serial PRIMARY KEY,
	store_id store_ref REFERENCES stores DEFERRABLE INITIALLY DEFERRED,
	name text NOT NULL,
	email citext UNIQUE,
	active boolean NOT NULL DEFAULT true,
	updated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE stores ADD CONSTRAINT stores_manager_fkey FOREIGN KEY (manager_id) REFERENCES staff DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE customers (
	id serial PRIMARY KEY,
	store_id store_ref REFERENCES stores,
	name text NOT NULL,
	email citext,
	address_id int REFERENCES addresses,
	active boolean NOT NULL DEFAULT true,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX customers_store ON customers (store_id);

CREATE TABLE films (
	id serial PRIMARY KEY,
	title text NOT NULL,
	released year_t,
	rating rating_t NOT NULL DEFAULT 'G',
	rental_days smallint NOT NULL DEFAULT 3,
	rental_rate numeric(4,2) NOT NULL DEFAULT 4.99,
	late_fee numeric(4,2) GENERATED ALWAYS AS (round(rental_rate / rental_days, 2)) STORED,
	search tsvector,
	updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX films_search ON films USING gin (search);
CREATE INDEX films_title ON films USING gin (title gin_trgm_ops);
CREATE TABLE categories (id serial PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE film_category (film_id int REFERENCES films ON DELETE CASCADE, category_id int REFERENCES categories, PRIMARY KEY (film_id, category_id));
CREATE TABLE inventory (id serial PRIMARY KEY, film_id int NOT NULL REFERENCES films, store_id store_ref REFERENCES stores,
	updated_at timestamptz NOT NULL DEFAULT now());

CREATE TABLE rentals (
	id serial PRIMARY KEY,
	rented_at timestamptz NOT NULL DEFAULT now(),
	inventory_id int NOT NULL REFERENCES inventory,
	customer_id int NOT NULL REFERENCES customers,
	returned_at timestamptz,
	staff_id int NOT NULL REFERENCES staff,
	updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX rentals_open ON rentals (inventory_id) WHERE returned_at IS NULL;

-- Payments by year; each partition declares its foreign keys, as schemas
-- written before PostgreSQL 11 do.
CREATE TABLE payments (
	id serial,
	customer_id int NOT NULL,
	staff_id int NOT NULL,
	rental_id int,
	amount numeric(5,2) NOT NULL CHECK (amount >= 0),
	paid_at timestamptz NOT NULL,
	PRIMARY KEY (paid_at, id)
) PARTITION BY RANGE (paid_at);
CREATE TABLE payments_2024 PARTITION OF payments FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE payments_2025 PARTITION OF payments FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE payments_rest PARTITION OF payments DEFAULT;
ALTER TABLE payments_2024 ADD FOREIGN KEY (customer_id) REFERENCES customers, ADD FOREIGN KEY (staff_id) REFERENCES staff,
	ADD FOREIGN KEY (rental_id) REFERENCES rentals;
ALTER TABLE payments_2025 ADD FOREIGN KEY (customer_id) REFERENCES customers, ADD FOREIGN KEY (staff_id) REFERENCES staff,
	ADD FOREIGN KEY (rental_id) REFERENCES rentals;
ALTER TABLE payments_rest ADD FOREIGN KEY (customer_id) REFERENCES customers, ADD FOREIGN KEY (staff_id) REFERENCES staff,
	ADD FOREIGN KEY (rental_id) REFERENCES rentals;

-- Notes, by inheritance; the children refer to staff by the column they
-- have from the parent.
CREATE TABLE notes (id serial PRIMARY KEY, author_id int, body text NOT NULL, written_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE customer_notes (customer_id int NOT NULL REFERENCES customers) INHERITS (notes);
CREATE TABLE film_notes (film_id int NOT NULL REFERENCES films) INHERITS (notes);
ALTER TABLE customer_notes ADD FOREIGN KEY (author_id) REFERENCES staff;
ALTER TABLE film_notes ADD FOREIGN KEY (author_id) REFERENCES staff;

CREATE TABLE rental_stats (day date PRIMARY KEY, rentals bigint NOT NULL DEFAULT 0);

-- Triggers.
CREATE FUNCTION last_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.updated_at := now();
	RETURN NEW;
END $$;
CREATE TRIGGER last_updated BEFORE UPDATE ON customers FOR EACH ROW EXECUTE FUNCTION last_updated();
CREATE TRIGGER last_updated BEFORE UPDATE ON staff FOR EACH ROW EXECUTE FUNCTION last_updated();
CREATE TRIGGER last_updated BEFORE UPDATE ON films FOR EACH ROW EXECUTE FUNCTION last_updated();
CREATE TRIGGER last_updated BEFORE UPDATE ON inventory FOR EACH ROW EXECUTE FUNCTION last_updated();
CREATE TRIGGER last_updated BEFORE UPDATE ON rentals FOR EACH ROW EXECUTE FUNCTION last_updated();
CREATE TRIGGER films_search BEFORE INSERT OR UPDATE ON films FOR EACH ROW
	EXECUTE FUNCTION tsvector_update_trigger(search, 'pg_catalog.english', title);

CREATE FUNCTION stamp_customer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.created_at := coalesce(NEW.created_at, now());
	NEW.email := lower(NEW.email);
	RETURN NEW;
END $$;
CREATE TRIGGER stamp_customer BEFORE INSERT ON customers FOR EACH ROW EXECUTE FUNCTION stamp_customer();

CREATE FUNCTION count_rentals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO rental_stats (day, rentals) SELECT current_date, count(*) FROM added
	ON CONFLICT (day) DO UPDATE SET rentals = rental_stats.rentals + excluded.rentals;
	RETURN NULL;
END $$;
CREATE TRIGGER count_rentals AFTER INSERT ON rentals REFERENCING NEW TABLE AS added
	FOR EACH STATEMENT EXECUTE FUNCTION count_rentals();

CREATE FUNCTION check_active_customer() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	v_customer integer := NEW.customer_id;
	v_active boolean;
BEGIN
	SELECT active INTO v_active FROM customers WHERE id = v_customer;
	IF NOT v_active THEN
		RAISE EXCEPTION 'customer % is not active', v_customer;
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER rentals_active_customer AFTER INSERT ON rentals DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION check_active_customer();

-- Functions and a procedure that take keys.
CREATE FUNCTION inventory_in_stock(p_inventory_id integer) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
	v_out integer;
BEGIN
	SELECT count(*) INTO v_out FROM rentals WHERE inventory_id = p_inventory_id AND returned_at IS NULL;
	RETURN v_out = 0;
END $$;

CREATE FUNCTION film_in_stock(p_film_id integer, p_store_id integer, OUT p_film_count integer) RETURNS SETOF integer
LANGUAGE sql STABLE AS $$
	SELECT id FROM inventory WHERE film_id = $1 AND store_id = $2 AND inventory_in_stock(id)
$$;

CREATE FUNCTION customer_balance(p_customer_id integer, p_at timestamptz) RETURNS numeric LANGUAGE plpgsql STABLE AS $$
DECLARE
	v_fees numeric;
	v_late_days integer;
	v_paid numeric;
BEGIN
	SELECT coalesce(sum(f.rental_rate), 0),
		coalesce(sum(greatest(0, extract(day FROM coalesce(r.returned_at, p_at) - r.rented_at)::integer - f.rental_days)), 0)
	INTO v_fees, v_late_days
	FROM rentals r JOIN inventory i ON i.id = r.inventory_id JOIN films f ON f.id = i.film_id
	WHERE r.customer_id = p_customer_id AND r.rented_at <= p_at;
	SELECT coalesce(sum(amount), 0) INTO v_paid FROM payments WHERE customer_id = p_customer_id AND paid_at <= p_at;
	RETURN v_fees + v_late_days - v_paid;
END $$;

CREATE FUNCTION rewards_report(min_monthly_purchases integer, min_amount numeric) RETURNS SETOF customers LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN QUERY SELECT c.* FROM customers c WHERE c.id IN (
		SELECT p.customer_id FROM payments p GROUP BY p.customer_id
		HAVING count(*) >= min_monthly_purchases AND sum(p.amount) >= min_amount);
END $$;

CREATE PROCEDURE rent_film(p_inventory_id integer, p_customer_id integer, p_staff_id integer, INOUT p_rental_id integer DEFAULT NULL)
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT inventory_in_stock(p_inventory_id) THEN
		RAISE EXCEPTION 'inventory % is out', p_inventory_id;
	END IF;
	INSERT INTO rentals (inventory_id, customer_id, staff_id) VALUES (p_inventory_id, p_customer_id, p_staff_id)
	RETURNING id INTO p_rental_id;
END $$;

CREATE FUNCTION film_rentals(p_film_id integer) RETURNS bigint LANGUAGE sql STABLE
BEGIN ATOMIC
	SELECT count(*) FROM rentals r JOIN inventory i ON i.id = r.inventory_id WHERE i.film_id = p_film_id;
END;

CREATE FUNCTION due_date(p_rented timestamptz, p_days integer) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
	SELECT p_rented + make_interval(days => p_days)
$$;

-- Views, one on another, and materialized views.
CREATE VIEW customer_list AS
	SELECT c.id, c.name, a.line AS address, ci.name AS city, co.name AS country, c.store_id
	FROM customers c LEFT JOIN addresses a ON a.id = c.address_id LEFT JOIN cities ci ON ci.id = a.city_id
		LEFT JOIN countries co ON co.id = ci.country_id;
CREATE VIEW film_list AS
	SELECT f.id, f.title, string_agg(c.name, ', ' ORDER BY c.name) AS categories, f.rating, f.rental_rate
	FROM films f LEFT JOIN film_category fc ON fc.film_id = f.id LEFT JOIN categories c ON c.id = fc.category_id
	GROUP BY f.id;
CREATE VIEW staff_list AS
	SELECT s.id, s.name, s.email, st.id AS store_id FROM staff s JOIN stores st ON st.id = s.store_id;
COMMENT ON VIEW staff_list IS 'staff and their e-mail: not for reporting';
CREATE VIEW sales_by_store AS
	SELECT st.id AS store_id, m.name AS manager, sum(p.amount) AS total
	FROM payments p JOIN staff s ON s.id = p.staff_id JOIN stores st ON st.id = s.store_id JOIN staff m ON m.id = st.manager_id
	GROUP BY st.id, m.name;
CREATE VIEW overdue AS
	SELECT cl.id AS customer_id, cl.name, r.id AS rental_id, due_date(r.rented_at, f.rental_days) AS due
	FROM customer_list cl JOIN rentals r ON r.customer_id = cl.id JOIN inventory i ON i.id = r.inventory_id
		JOIN films f ON f.id = i.film_id
	WHERE r.returned_at IS NULL AND due_date(r.rented_at, f.rental_days) < now();

CREATE MATERIALIZED VIEW sales_by_category AS
	SELECT c.name AS category, sum(p.amount) AS total
	FROM payments p JOIN rentals r ON r.id = p.rental_id JOIN inventory i ON i.id = r.inventory_id
		JOIN film_category fc ON fc.film_id = i.film_id JOIN categories c ON c.id = fc.category_id
	GROUP BY c.name;
CREATE UNIQUE INDEX sales_by_category_key ON sales_by_category (category);
COMMENT ON MATERIALIZED VIEW sales_by_category IS 'refreshed nightly';
CREATE MATERIALIZED VIEW customer_totals AS
	SELECT customer_id, count(*) AS payments, sum(amount) AS total FROM payments GROUP BY customer_id;
CREATE UNIQUE INDEX customer_totals_key ON customer_totals (customer_id);

-- Privileges: the app reads and writes; reporting reads the reports, not
-- staff_list.
GRANT SELECT, INSERT, UPDATE ON countries, cities, addresses, stores, staff, customers, films, categories, film_category,
	inventory, rentals, payments, notes, customer_notes, film_notes, rental_stats, customer_list, film_list, sales_by_store, overdue,
	sales_by_category, customer_totals TO {{app}};
GRANT SELECT ON customer_list, film_list, sales_by_store, sales_by_category, customer_totals TO {{reporting}};
REVOKE EXECUTE ON FUNCTION customer_balance(integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION customer_balance(integer, timestamptz) TO {{app}};

-- The data.
INSERT INTO countries (name) VALUES ('Arcadia'), ('Borduria'), ('Carpania');
INSERT INTO cities (country_id, name) SELECT 1 + i % 3, 'city ' || i FROM generate_series(1, 12) i;
INSERT INTO addresses (city_id, line) SELECT 1 + i % 12, i || ' Main Street' FROM generate_series(1, 80) i;
BEGIN;
INSERT INTO stores (id, manager_id, address_id, opened) VALUES (1, 1, 1, '2010-05-01'), (2, 2, 2, '2014-09-01');
INSERT INTO staff (id, store_id, name, email) VALUES (1, 1, 'Ann', 'ann@store.example'), (2, 2, 'Bo', 'bo@store.example'),
	(3, 1, 'Cy', 'cy@store.example');
COMMIT;
SELECT setval('stores_id_seq', 2), setval('staff_id_seq', 3);
INSERT INTO customers (store_id, name, email, address_id) SELECT 1 + i % 2, 'customer ' || i, 'C' || i || '@mail.example', 3 + i % 70
	FROM generate_series(1, 60) i;
INSERT INTO categories (name) VALUES ('Action'), ('Comedy'), ('Drama'), ('Horror');
INSERT INTO films (title, released, rating, rental_days) SELECT 'film ' || i, 1990 + i % 30, (ARRAY['G', 'PG', 'R'])[1 + i % 3]::rating_t, 3 + i % 4
	FROM generate_series(1, 40) i;
INSERT INTO film_category SELECT i, 1 + i % 4 FROM generate_series(1, 40) i;
INSERT INTO inventory (film_id, store_id) SELECT 1 + i % 40, 1 + i % 2 FROM generate_series(1, 120) i;
INSERT INTO rentals (rented_at, inventory_id, customer_id, returned_at, staff_id)
	SELECT timestamptz '2024-02-01' + i * interval '2 days', 1 + i % 120, 1 + i % 60,
		CASE WHEN i % 7 = 0 THEN NULL ELSE timestamptz '2024-02-04' + i * interval '2 days' END, 1 + i % 3
	FROM generate_series(1, 300) i;
INSERT INTO payments (customer_id, staff_id, rental_id, amount, paid_at)
	SELECT customer_id, staff_id, id, 2.99 + id % 3, rented_at + interval '1 day' FROM rentals;
INSERT INTO customer_notes (author_id, customer_id, body) SELECT 1 + i % 3, 1 + i % 60, 'note ' || i FROM generate_series(1, 20) i;
INSERT INTO film_notes (author_id, film_id, body) SELECT 1 + i % 3, 1 + i % 40, 'note ' || i FROM generate_series(1, 10) i;
REFRESH MATERIALIZED VIEW sales_by_category;
REFRESH MATERIALIZED VIEW customer_totals;

-- What the DBA set for tables made from now on: reporting reads them.
ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO {{reporting}};
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO {{reporting}};

RESET ROLE;
CREATE PUBLICATION store_changes FOR TABLE rentals, payments WITH (publish_via_partition_root = true);
