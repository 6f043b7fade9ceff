package adopt

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// partitionedSchema is a store whose payments are partitioned by date,
// with a serial key in a composite primary key (paid_at, id), as
// PostgreSQL requires of a partitioned table; the partitions have their
// own foreign keys to customers, staff and rentals (as schemas written
// before PostgreSQL 11 declare them), the parent one more; a partition is
// itself partitioned; refunds refer to payments; and notes are an
// inheritance tree whose children refer to staff by a column they have
// from the parent.
const partitionedSchema = `
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL);
CREATE TABLE staff (id serial PRIMARY KEY, name text NOT NULL);
CREATE TABLE rentals (id serial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, staff_id int REFERENCES staff);
CREATE TABLE payments (id serial, customer_id int NOT NULL, staff_id int NOT NULL, rental_id int, amount numeric(6,2) NOT NULL,
	paid_at timestamptz NOT NULL, PRIMARY KEY (paid_at, id)) PARTITION BY RANGE (paid_at);
CREATE TABLE payments_2024 PARTITION OF payments FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE payments_2025 PARTITION OF payments FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')
	PARTITION BY RANGE (paid_at);
CREATE TABLE payments_2025_h1 PARTITION OF payments_2025 FOR VALUES FROM ('2025-01-01') TO ('2025-07-01');
CREATE TABLE payments_2025_h2 PARTITION OF payments_2025 FOR VALUES FROM ('2025-07-01') TO ('2026-01-01');
CREATE TABLE payments_later PARTITION OF payments DEFAULT;
ALTER TABLE payments_2024 ADD FOREIGN KEY (customer_id) REFERENCES customers, ADD FOREIGN KEY (staff_id) REFERENCES staff;
ALTER TABLE payments_2025_h1 ADD FOREIGN KEY (customer_id) REFERENCES customers, ADD FOREIGN KEY (staff_id) REFERENCES staff;
ALTER TABLE payments_2025_h2 ADD FOREIGN KEY (customer_id) REFERENCES customers;
ALTER TABLE payments ADD FOREIGN KEY (rental_id) REFERENCES rentals;
CREATE TABLE refunds (id serial PRIMARY KEY, paid_at timestamptz NOT NULL, payment_id int NOT NULL,
	FOREIGN KEY (paid_at, payment_id) REFERENCES payments);
CREATE TABLE notes (id serial PRIMARY KEY, author_id int, body text);
CREATE TABLE customer_notes (customer_id int NOT NULL REFERENCES customers) INHERITS (notes);
ALTER TABLE customer_notes ADD FOREIGN KEY (author_id) REFERENCES staff;

INSERT INTO customers (name) SELECT 'customer ' || i FROM generate_series(1, 50) i;
INSERT INTO staff (name) VALUES ('Ann'), ('Bo');
INSERT INTO rentals (customer_id, staff_id) SELECT 1 + i % 50, 1 + i % 2 FROM generate_series(1, 100) i;
INSERT INTO payments (customer_id, staff_id, rental_id, amount, paid_at)
	SELECT 1 + i % 50, 1 + i % 2, 1 + i % 100, 2.99, timestamptz '2024-03-01' + i * interval '5 days' FROM generate_series(1, 120) i;
INSERT INTO refunds (paid_at, payment_id) SELECT paid_at, id FROM payments WHERE id % 10 = 0;
INSERT INTO customer_notes (author_id, customer_id, body) VALUES (1, 1, 'called'), (2, 3, 'late');
`

// partitionedTables are the tables of partitionedSchema to adopt.
var partitionedTables = []string{"customers", "staff", "rentals", "payments", "refunds"}

// TestAdoptPartitioned: the columns of partitions that refer to adopted
// keys (by foreign keys of their own or of their parent) are widened on
// the partitioned table, which reaches every partition, a partition's
// partitions too; the partitioned table's own serial column in its
// composite key is adopted as its key; so is a child's column of an
// inheritance tree, on its parent. Afterwards new snowflake keys, far above
// 2^31, go through every foreign key, into every partition (a row
// inserted into a partition directly gets one too), and every foreign
// key is still valid. The control refuses such columns, as PostgreSQL
// does when told to change them where they are: no schema with a
// partitioned child could be adopted.
func TestAdoptPartitioned(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db := openDB(t, ctx, partitionedSchema)

	_, err := newPlanWithout(ctx, db, partitionedTables, Options{}, defences{noParentColumns: true})
	if !errors.Is(err, ErrColumn) || !strings.Contains(err.Error(), "public.payments_2024.customer_id (it is inherited from a parent table)") {
		t.Fatalf("control: err = %v; want ErrColumn naming a partition's inherited column", err)
	}
	t.Logf("control: %v", err)

	plan, err := NewPlan(ctx, db, partitionedTables, Options{})
	if err != nil {
		t.Fatal(err)
	}
	script := plan.SQL()
	t.Logf("plan:\n%s", script)
	for _, want := range []string{
		"-- public.payments: key id integer, nextval('public.payments_id_seq'::regclass), largest key 120",
		"ALTER TABLE public.payments ALTER COLUMN customer_id TYPE bigint, ALTER COLUMN staff_id TYPE bigint, " +
			"ALTER COLUMN rental_id TYPE bigint, ALTER COLUMN id TYPE bigint;",
		"reaches its partitions and children public.payments_2024, public.payments_2025, public.payments_2025_h1",
		"ALTER TABLE public.notes ALTER COLUMN author_id TYPE bigint",
		"ALTER TABLE public.customer_notes ALTER COLUMN customer_id TYPE bigint",
		"ALTER TABLE public.refunds ALTER COLUMN payment_id TYPE bigint",
		"ALTER TABLE public.payments ALTER COLUMN id SET DEFAULT public.snowflake_id()",
		"ALTER SEQUENCE public.payments_id_seq OWNED BY NONE",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the plan does not say %q", want)
		}
	}
	if err := plan.Apply(ctx, db); err != nil {
		t.Fatal(err)
	}

	if n := scalar[int](t, ctx, db, `SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		WHERE c.relname LIKE 'payments%' AND a.attname IN ('id', 'customer_id', 'staff_id', 'rental_id') AND a.atttypid <> 'bigint'::regtype`); n != 0 {
		t.Errorf("%d columns of payments and its partitions are not bigint", n)
	}
	var customer, staff, rental, payment, note int64
	if err := db.QueryRowContext(ctx, `WITH c AS (INSERT INTO customers (name) VALUES ('new') RETURNING id),
			s AS (INSERT INTO staff (name) VALUES ('new') RETURNING id),
			r AS (INSERT INTO rentals (customer_id, staff_id) SELECT c.id, s.id FROM c, s RETURNING id, customer_id, staff_id)
		SELECT customer_id, staff_id, id FROM r`).Scan(&customer, &staff, &rental); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"2024-06-01", "2025-03-01", "2025-09-01", "2031-01-01"} {
		if err := db.QueryRowContext(ctx, `INSERT INTO payments (customer_id, staff_id, rental_id, amount, paid_at)
			VALUES ($1, $2, $3, 1.50, $4) RETURNING id`, customer, staff, rental, at).Scan(&payment); err != nil {
			t.Fatalf("a payment of %s with new keys: %v", at, err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO refunds (paid_at, payment_id) VALUES ($1, $2)", at, payment); err != nil {
			t.Fatalf("a refund of the payment of %s: %v", at, err)
		}
	}
	direct := scalar[int64](t, ctx, db, `INSERT INTO payments_2025_h1 (customer_id, staff_id, amount, paid_at)
		VALUES ($1, $2, 1, '2025-02-02') RETURNING id`, customer, staff)
	if err := db.QueryRowContext(ctx, `INSERT INTO customer_notes (author_id, customer_id, body) VALUES ($1, $2, 'new')
		RETURNING author_id`, staff, customer).Scan(&note); err != nil {
		t.Fatal(err)
	}
	const limit = 1<<31 - 1
	for name, k := range map[string]int64{"customer": customer, "staff": staff, "rental": rental, "payment": payment,
		"payment inserted into a partition": direct} {
		if k <= limit {
			t.Errorf("the new %s's key is %d, not a snowflake", name, k)
		}
	}
	if n := scalar[int](t, ctx, db, "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND NOT convalidated"); n != 0 {
		t.Errorf("%d foreign keys are not valid after adopting", n)
	}
	if n := scalar[int](t, ctx, db, "SELECT count(*) FROM payments"); n != 125 {
		t.Errorf("payments holds %d rows; want the 120 old and the 5 new", n)
	}
	again, err := NewPlan(ctx, db, partitionedTables, Options{})
	if err != nil || len(again.Steps) != 0 {
		t.Errorf("adopting again: %v\n%s", err, again.SQL())
	}
}
