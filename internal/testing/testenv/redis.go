package testenv

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Redis returns the host:port of the shared standalone Redis server named by
// SNOWKEY_TEST_REDIS. Keys must start with KeyPrefix(t).
//
// Without SNOWKEY_TEST_REDIS the test is skipped, or fails when CI=true.
func Redis(t testing.TB) string {
	t.Helper()
	return lookup(t, EnvRedis, "127.0.0.1:6379")
}

// redisCluster returns the host:port of every node of the shared Redis
// Cluster named by SNOWKEY_TEST_REDIS_CLUSTER. Keys must start with
// KeyPrefix(t).
//
// Without SNOWKEY_TEST_REDIS_CLUSTER the test is skipped, or fails when
// CI=true.
func redisCluster(t testing.TB) []string {
	t.Helper()
	v := lookup(t, EnvRedisCluster, "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002")
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// RedisClient returns a client of the shared Redis server (see Redis),
// checked with a PING and closed when the test ends. It has no read or
// write timeout of its own, so that a machine too busy to answer in
// go-redis's default 3 s makes calls slow, not failed (nor retried, which
// would run a script twice); the test's Deadline bounds them.
func RedisClient(t testing.TB) *redis.Client {
	t.Helper()
	addr := Redis(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -1, WriteTimeout: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := OpContext(OpTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: redis at %s (%s): %v", addr, EnvRedis, err)
	}
	return c
}

// RedisClusterClient returns a client of the shared Redis Cluster (see
// redisCluster), checked with a PING and closed when the test ends, with
// no timeout of its own, as RedisClient.
func RedisClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	addrs := redisCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ReadTimeout: -1, WriteTimeout: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := OpContext(OpTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: redis cluster at %s (%s): %v", strings.Join(addrs, ","), EnvRedisCluster, err)
	}
	return c
}
