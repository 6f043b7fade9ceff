package adopt

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// functionsSchema is a rental store whose functions and procedures take
// and give keys as integer, as schemas written for 32-bit keys do: by
// argument, by OUT argument, by RETURNS TABLE, by a variable a trigger
// fills from NEW, by a result a view shows and a policy compares, and by a
// cast in a policy; and one function whose integer is no key and must stay
// one (make_interval takes no bigint).
const functionsSchema = `
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL);
CREATE TABLE films (id serial PRIMARY KEY, title text NOT NULL, rental_days int NOT NULL DEFAULT 3);
CREATE TABLE inventory (id serial PRIMARY KEY, film_id int NOT NULL REFERENCES films, store smallint NOT NULL);
CREATE TABLE rentals (id serial PRIMARY KEY, inventory_id int NOT NULL REFERENCES inventory,
	customer_id int NOT NULL REFERENCES customers, rented_at timestamptz NOT NULL DEFAULT now(), returned_at timestamptz);
CREATE TABLE rental_log (rental_id int REFERENCES rentals, customer_id int REFERENCES customers, at timestamptz DEFAULT now());

CREATE FUNCTION inventory_in_stock(p_inventory_id integer) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
	v_out integer;
BEGIN
	SELECT count(*) INTO v_out FROM rentals WHERE inventory_id = p_inventory_id AND returned_at IS NULL;
	RETURN v_out = 0;
END $$;

CREATE FUNCTION film_in_stock(p_film_id int, p_store smallint, OUT p_inventory int) RETURNS SETOF int LANGUAGE sql STABLE AS $$
	SELECT id FROM inventory WHERE film_id = $1 AND store = $2 AND inventory_in_stock(id)
$$;

CREATE FUNCTION customer_rentals(customer int) RETURNS TABLE (rental int, film int, days int) LANGUAGE sql STABLE AS $$
	SELECT r.id, i.film_id, f.rental_days FROM rentals r JOIN inventory i ON i.id = r.inventory_id JOIN films f ON f.id = i.film_id
	WHERE r.customer_id = customer
$$;

CREATE PROCEDURE rent(p_inventory int, p_customer int, INOUT p_rental int DEFAULT NULL) LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO rentals (inventory_id, customer_id) VALUES (p_inventory, p_customer) RETURNING id INTO p_rental;
END $$;

CREATE FUNCTION due(p_rented timestamptz, p_days integer) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
	SELECT p_rented + make_interval(days => p_days)
$$;

CREATE FUNCTION last_rental(p_customer_id int) RETURNS int LANGUAGE sql STABLE AS $$
	SELECT max(id) FROM rentals WHERE customer_id = p_customer_id
$$;
COMMENT ON FUNCTION last_rental(int) IS 'the latest rental of a customer';
CREATE VIEW customer_last AS SELECT c.id, c.name, last_rental(c.id) AS rental FROM customers c;

CREATE FUNCTION log_rental() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	v_customer integer := NEW.customer_id;
BEGIN
	INSERT INTO rental_log (rental_id, customer_id) VALUES (NEW.id, v_customer);
	RETURN NEW;
END $$;
CREATE TRIGGER log_rental AFTER INSERT ON rentals FOR EACH ROW EXECUTE FUNCTION log_rental();

CREATE FUNCTION current_customer() RETURNS integer LANGUAGE sql STABLE AS $$
	SELECT nullif(current_setting('app.customer', true), '')::integer
$$;
ALTER TABLE rentals ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rentals ON rentals USING (customer_id = current_customer());
ALTER TABLE rental_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_log ON rental_log USING (customer_id = current_setting('app.customer')::int);

INSERT INTO customers (name) SELECT 'customer ' || i FROM generate_series(1, 20) i;
INSERT INTO films (title) SELECT 'film ' || i FROM generate_series(1, 10) i;
INSERT INTO inventory (film_id, store) SELECT 1 + i % 10, 1 + i % 2 FROM generate_series(1, 30) i;
CALL rent(1, 1);
CALL rent(2, 2);
`

var functionsTables = []string{"customers", "films", "inventory", "rentals"}

// TestAdoptFunctions: the integers of functions and procedures that hold
// keys are found and widened, with what depends on them (a view, a
// policy), and afterwards every function and procedure works with new
// snowflake keys, far above 2^31: each is called, the trigger fires, the
// view shows the new rental, the policies let a customer see their own.
// due's integer is no key and stays one. The control leaves the
// functions as they are (with the view that makes Apply fail left out):
// a call with a new key finds no function.
func TestAdoptFunctions(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db := openDB(t, ctx, functionsSchema)
	plan, err := NewPlan(ctx, db, functionsTables, Options{})
	if err != nil {
		t.Fatal(err)
	}
	script := plan.SQL()
	t.Logf("plan:\n%s", script)
	for _, want := range []string{
		"CREATE FUNCTION public.inventory_in_stock(p_inventory_id bigint)",
		"v_out integer;", // a count, not a key
		"CREATE FUNCTION public.film_in_stock(p_film_id bigint, p_store smallint, OUT p_inventory bigint)\n RETURNS SETOF bigint",
		"RETURNS TABLE(rental bigint, film bigint, days integer)",
		"CREATE PROCEDURE public.rent(IN p_inventory bigint, IN p_customer bigint, INOUT p_rental bigint DEFAULT NULL::integer)",
		"v_customer bigint := NEW.customer_id;",
		"CREATE FUNCTION public.last_rental(p_customer_id bigint)\n RETURNS bigint",
		"COMMENT ON FUNCTION public.last_rental(p_customer_id bigint) IS 'the latest rental of a customer'",
		"CREATE FUNCTION public.current_customer()\n RETURNS bigint",
		"'')::bigint",
		"(customer_id = (current_setting('app.customer'::text))::bigint)",
		"DROP VIEW public.customer_last",
		"DROP POLICY own_rentals ON public.rentals",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the plan does not say %q", want)
		}
	}
	if strings.Contains(script, "public.due") {
		t.Error("the plan changes due(), whose integer holds no key")
	}
	if err := plan.Apply(ctx, db); err != nil {
		t.Fatal(err)
	}

	// New keys, through every function.
	customer := scalar[int64](t, ctx, db, "INSERT INTO customers (name) VALUES ('new') RETURNING id")
	film := scalar[int64](t, ctx, db, "INSERT INTO films (title) VALUES ('new') RETURNING id")
	inventory := scalar[int64](t, ctx, db, "INSERT INTO inventory (film_id, store) VALUES ($1, 1) RETURNING id", film)
	if !scalar[bool](t, ctx, db, "SELECT inventory_in_stock($1)", inventory) {
		t.Error("a new inventory item is not in stock")
	}
	if got := scalar[int64](t, ctx, db, "SELECT p_inventory FROM film_in_stock($1, 1::smallint)", film); got != inventory {
		t.Errorf("film_in_stock = %d; want %d", got, inventory)
	}
	rental := scalar[int64](t, ctx, db, "CALL rent($1, $2)", inventory, customer)
	if rental <= 1<<31 {
		t.Errorf("rent gave rental %d; want a snowflake", rental)
	}
	if scalar[bool](t, ctx, db, "SELECT inventory_in_stock($1)", inventory) {
		t.Error("a rented item is in stock")
	}
	if got := scalar[string](t, ctx, db, "SELECT format('%s %s %s', rental, film, days) FROM customer_rentals($1)", customer); got != fmt.Sprintf("%d %d 3", rental, film) {
		t.Errorf("customer_rentals = %s", got)
	}
	if got := scalar[int64](t, ctx, db, "SELECT rental FROM customer_last WHERE id = $1", customer); got != rental {
		t.Errorf("customer_last shows rental %d; want %d", got, rental)
	}
	if got := scalar[int64](t, ctx, db, "SELECT customer_id FROM rental_log WHERE rental_id = $1", rental); got != customer {
		t.Errorf("the trigger logged customer %d; want %d", got, customer)
	}
	if got := scalar[string](t, ctx, db, "SELECT due('2025-01-01 00:00Z', 2)::date::text"); got != "2025-01-03" {
		t.Errorf("due = %s", got)
	}
	if got := scalar[string](t, ctx, db, "SELECT pg_get_function_identity_arguments('public.due'::regproc)"); got != "p_rented timestamp with time zone, p_days integer" {
		t.Errorf("due takes %s after adopting; want its integer as it was", got)
	}
	reader := testRole(t, ctx, db, "reader", "LOGIN")
	mustExec(t, ctx, db, "GRANT SELECT ON rentals, rental_log TO "+reader)
	as := asRole(t, ctx, db, reader)
	conn, err := as.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExec(t, ctx, conn, fmt.Sprintf("SET app.customer = '%d'", customer))
	if got := scalar[int64](t, ctx, conn, "SELECT count(*) FROM rentals"); got != 1 {
		t.Errorf("the new customer sees %d rentals through the policy; want 1", got)
	}
	if got := scalar[int64](t, ctx, conn, "SELECT count(*) FROM rental_log"); got != 1 {
		t.Errorf("the new customer sees %d log rows through the policy; want 1", got)
	}

	// The control: the functions left as they are.
	ctl := openDB(t, ctx, functionsSchema+"DROP VIEW customer_last;")
	plan, err = newPlanWithout(ctx, ctl, functionsTables, Options{}, defences{noFunctions: true})
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := plan.Apply(ctx, ctl); err != nil {
		t.Fatalf("control: %v", err)
	}
	film = scalar[int64](t, ctx, ctl, "INSERT INTO films (title) VALUES ('new') RETURNING id")
	inventory = scalar[int64](t, ctx, ctl, "INSERT INTO inventory (film_id, store) VALUES ($1, 1) RETURNING id", film)
	_, err = ctl.ExecContext(ctx, "SELECT inventory_in_stock($1::bigint)", inventory)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42883" {
		t.Errorf("control: inventory_in_stock(a new key) = %v; want no such function (42883): the test does not reach the fault", err)
	}
	t.Logf("control: %v", err)
}

// TestAdoptFunctionsRefused: a function that holds keys and that adopt
// cannot widen (its argument is of a domain), or whose widening an index
// depends on, is refused, named with the statement that widens it.
func TestAdoptFunctionsRefused(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	db := openDB(t, ctx, `
CREATE DOMAIN customer_ref AS integer CHECK (VALUE > 0);
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id serial PRIMARY KEY, customer_id int REFERENCES customers);
CREATE FUNCTION customer_name(p_customer_id customer_ref) RETURNS text LANGUAGE sql STABLE AS
	'SELECT name FROM customers WHERE id = p_customer_id';
CREATE FUNCTION bucket(p_customer_id int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT p_customer_id % 16';
CREATE INDEX orders_bucket ON orders (bucket(customer_id));
`)
	_, err := NewPlan(ctx, db, []string{"customers", "orders"}, Options{})
	if !errors.Is(err, ErrFunctionKeys) || !errors.Is(err, ErrDependents) {
		t.Fatalf("err = %v; want ErrFunctionKeys and ErrDependents", err)
	}
	for _, want := range []string{
		"public.customer_name holds keys in argument p_customer_id of domain public.customer_ref",
		"DROP FUNCTION public.customer_name(p_customer_id public.customer_ref)",
		"index public.orders_bucket (on function public.bucket(p_customer_id integer)",
		"CREATE FUNCTION public.bucket(p_customer_id bigint)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
