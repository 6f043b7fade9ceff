package sqltype_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/sqltype"
)

func ExampleNullID() {
	type Post struct {
		ID       idtype.ID      `json:"id"`
		ParentID sqltype.NullID `json:"parent_id"` // NULL for a thread's first post
	}
	first := Post{ID: 1541815603606036480}
	reply := Post{ID: 1541815603606036481, ParentID: sqltype.NewNullID(first.ID)}
	for _, p := range []Post{first, reply} {
		b, _ := json.Marshal(p)
		fmt.Println(string(b))
	}

	var back Post
	_ = json.Unmarshal([]byte(`{"id":"1541815603606036482","parent_id":null}`), &back)
	fmt.Println(back.ParentID.Valid)
	// Output:
	// {"id":"1541815603606036480","parent_id":null}
	// {"id":"1541815603606036481","parent_id":"1541815603606036480"}
	// false
}

func ExampleNullID_Scan() {
	// What database/sql hands over for a NULL and for a value.
	var n sqltype.NullID
	_ = n.Scan(nil)
	fmt.Println(n.Valid, n)
	_ = n.Scan(int64(1541815603606036480))
	fmt.Println(n.Valid, n)

	// A negative number is never an ID; the error is idtype's own.
	err := n.Scan(int64(-1))
	fmt.Println(errors.Is(err, idtype.ErrNegative), err)
	// Output:
	// false NULL
	// true 1541815603606036480
	// true idtype: scan int64(-1): negative
}

func ExampleIDs() {
	tags := sqltype.IDs{1541815603606036480, 9007199254740993}

	// JSON: strings, so that JavaScript keeps every digit.
	b, _ := json.Marshal(tags)
	fmt.Println(string(b))

	// Clients may send numbers as well.
	var in sqltype.IDs
	_ = json.Unmarshal([]byte(`["1541815603606036480", 9007199254740993]`), &in)
	fmt.Println(len(in), in[1])

	// What a database/sql driver other than pgx receives: the text of a
	// bigint[]. pgx sends the binary array instead.
	v, _ := tags.Value()
	fmt.Println(v)
	// Output:
	// ["1541815603606036480","9007199254740993"]
	// 2 9007199254740993
	// {1541815603606036480,9007199254740993}
}

func ExampleIDs_Scan() {
	var ids sqltype.IDs
	err := ids.Scan("{1,NULL,3}")
	fmt.Println(errors.Is(err, idtype.ErrNull))
	err = ids.Scan("{{1,2},{3,4}}")
	fmt.Println(errors.Is(err, sqltype.ErrDimensions))
	fmt.Println(err)
	// Output:
	// true
	// true
	// idtype: scan sqltype.IDs "{{1,2},{3,4}}": array has more than one dimension (IDs is a flat list): nested array at offset 1
}

// RegisterPgx goes in a pool's AfterConnect, so that every connection has
// it before its first query.
func ExampleRegisterPgx() {
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		sqltype.RegisterPgx(conn.TypeMap())
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	var id idtype.ID
	err = pool.QueryRow(context.Background(), "SELECT 2124962550683529217::float8").Scan(&id)
	fmt.Println(errors.Is(err, idtype.ErrUnsupportedType)) // a float never becomes an ID
}

// The same map works without a server; this is what RegisterPgx changes.
func ExampleRegisterPgx_typeMap() {
	m := pgtype.NewMap()
	sqltype.RegisterPgx(m)
	var id idtype.ID
	err := m.Scan(pgtype.Int8OID, pgtype.BinaryFormatCode, []byte{0, 0, 0, 0, 0, 0, 0, 42}, &id)
	fmt.Println(id, err)
	err = m.Scan(pgtype.Float8OID, pgtype.TextFormatCode, []byte("42"), &id)
	fmt.Println(errors.Is(err, idtype.ErrUnsupportedType))
	// Output:
	// 42 <nil>
	// true
}
