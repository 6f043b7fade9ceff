package faultproxy

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestProxyRedisLostScriptReply drops the reply to a Lua script through a
// real Redis: the client gets an error, yet the script ran. The script is
// new to the server, so the first EVALSHA gets NOSCRIPT, which the proxy
// lets through; the EVAL that follows loses its reply.
func TestProxyRedisLostScriptReply(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	key := testenv.KeyPrefix(t) + "n"
	// Unique per test, so the server has never seen it.
	src := "return redis.call('INCR', KEYS[1]) -- " + key
	direct := testenv.RedisClient(t)
	p := Start(t, testenv.Redis(t))
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	script := redis.NewScript(src)

	p.DropReplies(MatchRedisScript(src), 1)
	if n, err := script.Run(ctx, rdb, []string{key}).Int(); err == nil {
		t.Fatalf("script answered %d through a dropped reply", n)
	}
	if err := p.AwaitDrops(1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := direct.Get(ctx, key).Int(); err != nil || n != 1 {
		t.Fatalf("after the lost reply the counter is %d, %v; want 1: the script ran", n, err)
	}
	// armed once: the next run answers, now by EVALSHA.
	if n, err := script.Run(ctx, rdb, []string{key}).Int(); err != nil || n != 2 {
		t.Fatalf("second run: %d, %v; want 2", n, err)
	}
	if st := p.Stats(); st.RepliesDropped != 1 || st.armed != 1 {
		t.Errorf("stats %+v; want 1 armed, 1 dropped", st)
	}
}

// TestProxyPostgresLostCommitReply drops the reply to an INSERT through a
// real PostgreSQL, in exec mode so that every execution carries its SQL
// text: the client gets an error, yet the row is there.
func TestProxyPostgresLostReply(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dsn := testenv.Postgres(t)
	direct, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Exec(ctx, "CREATE TABLE t (n int)"); err != nil {
		t.Fatal(err)
	}

	p := Start(t, hostOf(t, dsn))
	cfg, err := pgx.ParseConfig(withHost(dsn, p.Addr()) + "&default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const insert = "INSERT INTO t (n) VALUES ($1)"
	if _, err := conn.Exec(ctx, insert, 1); err != nil { // once: the text is sent every time anyway
		t.Fatal(err)
	}
	p.DropReplies(MatchPGQuery(insert), 1)
	if _, err := conn.Exec(ctx, insert, 2); err == nil {
		t.Fatal("INSERT answered through a dropped reply")
	}
	var n int
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM t WHERE n = 2").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows with n = 2: %d, %v; want 1: the INSERT ran and committed", n, err)
	}
}

func hostOf(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func withHost(dsn, addr string) string {
	u, _ := url.Parse(dsn)
	u.Host = addr
	return u.String()
}
