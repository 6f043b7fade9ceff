package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func TestSanitize(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"TestX", 48, "TestX"},
		{"TestX/sub_case-1", 48, "TestX/sub_case-1"},
		{"TestX/{hash}:tag *?", 48, "TestX/_hash__tag___"},
		{"TestLongName", 4, "Test"},
		{"Test/ü", 48, "Test/__"},
	}
	for _, tt := range tests {
		if got := sanitize(tt.in, tt.n); got != tt.want {
			t.Errorf("sanitize(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestKeyPrefix(t *testing.T) {
	p := KeyPrefix(t)
	if again := KeyPrefix(t); again != p {
		t.Errorf("second call in the same test: %q, first %q", again, p)
	}
	if !strings.HasPrefix(p, "test:TestKeyPrefix:") || !strings.HasSuffix(p, ":") {
		t.Errorf("KeyPrefix = %q, want test:TestKeyPrefix:<random>:", p)
	}
	seen := map[string]bool{p: true}
	for i := range 3 {
		t.Run("sub{tag}", func(t *testing.T) {
			sp := KeyPrefix(t)
			if strings.ContainsAny(sp, "{}") {
				t.Errorf("prefix %q holds a hash tag brace", sp)
			}
			if seen[sp] {
				t.Errorf("run %d: prefix %q seen before", i, sp)
			}
			seen[sp] = true
		})
	}
}

func TestFreePort(t *testing.T) {
	Deadline(t, 2*time.Minute)
	port := freePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	l.Close()
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	Deadline(t, 2*time.Minute)
	ctx := t.Context()
	var names []string
	t.Run("create", func(t *testing.T) {
		for range 2 {
			dsn := Postgres(t)
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var name string
			if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(dsn)
			if "/"+name != u.Path {
				t.Errorf("connected to database %q, URL names %q", name, u.Path)
			}
			if _, err := conn.Exec(ctx, "CREATE TABLE t (id bigint PRIMARY KEY)"); err != nil {
				t.Fatalf("fresh database %s: %v", name, err)
			}
			names = append(names, name)
			// The connection stays open: the drop must force it closed.
		}
		if names[0] == names[1] {
			t.Errorf("two calls gave the same database %q", names[0])
		}
	})
	if len(names) != 2 {
		return
	}
	conn, err := pgx.Connect(ctx, os.Getenv(EnvPostgres))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d of the databases %v still exist after the test ended", left, names)
	}
}

func TestRedisClient(t *testing.T) {
	t.Parallel()
	c := RedisClient(t)
	key := KeyPrefix(t) + "k"
	if err := c.Set(t.Context(), key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(t.Context(), key).Result(); err != nil || got != "v" {
		t.Fatalf("GET %s = %q, %v; want \"v\"", key, got, err)
	}
}

func TestRedisClusterClient(t *testing.T) {
	t.Parallel()
	Deadline(t, 2*time.Minute)
	if n := len(redisCluster(t)); n < 3 {
		t.Errorf("%s names %d nodes, want at least 3", EnvRedisCluster, n)
	}
	c := RedisClusterClient(t)
	ctx := t.Context()
	prefix := KeyPrefix(t)
	for i := range 30 {
		key := prefix + strconv.Itoa(i)
		if err := c.Set(ctx, key, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	var masters atomic.Int32 // ForEachMaster runs the function concurrently
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: %s", m.Options().Addr, info)
		}
		masters.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := masters.Load(); n != 3 {
		t.Errorf("cluster has %d masters, want 3", n)
	}
}
