package private

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// SentinelMaster is the name under which StartRedisSentinel's Sentinel
// knows its master: the MasterName of a FailoverClient.
const SentinelMaster = "snowkey"

// Sentinel is a private Redis Sentinel that belongs to one test. Make
// one with StartRedisSentinel.
type Sentinel struct {
	*RedisServer // the Sentinel's own process: Addr, Kill, Restart
	client       *redis.Client
}

// StartRedisSentinel starts a private redis-server in Sentinel mode, as
// StartRedis starts a server (extraArgs are more options), that monitors
// the master at masterAddr as SentinelMaster with a quorum of 1, and deems
// it down after 5s without an answer. It returns once the Sentinel answers
// PING; it is killed when the test ends. The Sentinel's own commands
// (SENTINEL …) go through Client(); FailoverClient finds the master
// through it.
func StartRedisSentinel(t testing.TB, masterAddr string, extraArgs ...string) *Sentinel {
	t.Helper()
	bin, _ := redisBinaries(t)
	dir := t.TempDir()
	ctx, cancel := testenv.OpContext(testenv.OpTimeout)
	defer cancel()
	r, err := launch.StartSentinel(ctx,
		launch.RedisConfig{Bin: bin, Dir: dir, Args: extraArgs},
		launch.SentinelConfig{Master: SentinelMaster, MasterAddr: masterAddr})
	if err != nil {
		t.Fatalf("private: %v", err)
	}
	return &Sentinel{RedisServer: ownRedis(t, r)}
}

// FailoverClient returns a go-redis FailoverClient (a *redis.Client) that
// asks the Sentinel for the master, made on first use, checked with a
// PING and closed when the test ends.
func (s *Sentinel) FailoverClient() *redis.Client {
	s.t.Helper()
	if s.client != nil {
		return s.client
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    SentinelMaster,
		SentinelAddrs: []string{s.Addr()},
	})
	s.t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := testenv.OpContext(testenv.OpTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		s.t.Fatalf("private: PING the master through the Sentinel at %s: %v", s.Addr(), err)
	}
	s.client = c
	return c
}
