package private

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// StartRedisReplica starts a private redis-server, as StartRedis does, that
// replicates from the server at primary (host:port), and returns once its
// first sync is done. primary may be the address of a faultproxy.Proxy in
// front of the real primary, so that a test can freeze or cut replication
// and let the replica lag. extraArgs are more redis-server options.
//
// The replica keeps replicating after Restart (its options say so) unless
// the test promoted it and wants it to stay a primary; then it calls
// Promote again after the restart.
func StartRedisReplica(t testing.TB, primary string, extraArgs ...string) *RedisServer {
	t.Helper()
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		t.Fatalf("private: replica of %q: %v", primary, err)
	}
	s := StartRedis(t, append([]string{"--replicaof", host, port}, extraArgs...)...)
	s.waitLinkUp(testenv.OpTimeout)
	return s
}

// Client returns a client of the server, made on first use and closed
// when the test ends. It does not retry failed commands, so a test sees
// each failure.
func (s *RedisServer) Client() *redis.Client {
	if s.client == nil {
		s.client = redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		c := s.client
		s.t.Cleanup(func() { _ = c.Close() })
	}
	return s.client
}

// ConfigSet sets a server option at run time (CONFIG SET), such as
// "maxmemory", "2mb" or "maxmemory-policy", "allkeys-lru". The setting
// is lost at Restart; to keep it, pass it to StartRedis instead.
func (s *RedisServer) ConfigSet(param, value string) {
	s.t.Helper()
	s.do("CONFIG", "SET", param, value)
}

// Info returns the fields of one INFO section, such as "replication" or
// "memory".
func (s *RedisServer) Info(section string) map[string]string {
	s.t.Helper()
	ctx, cancel := testenv.OpContext(testenv.OpTimeout)
	defer cancel()
	info, err := launch.Info(ctx, s.Addr(), section)
	if err != nil {
		s.t.Fatalf("private: INFO %s on %s: %v", section, s.Addr(), err)
	}
	return info
}

// ReplicationOffset returns the server's replication offset: for a
// primary, how far its replication stream goes (master_repl_offset); for a
// replica, how much of it the replica has processed (slave_repl_offset).
func (s *RedisServer) ReplicationOffset() int64 {
	s.t.Helper()
	info := s.Info("replication")
	field := "master_repl_offset"
	if info["role"] == "slave" {
		field = "slave_repl_offset"
	}
	n, err := strconv.ParseInt(info[field], 10, 64)
	if err != nil {
		s.t.Fatalf("private: %s of %s: %q", field, s.Addr(), info[field])
	}
	return n
}

// ReplicaOf makes the server a replica of the server at primary
// (REPLICAOF host port) and returns without waiting for the sync.
func (s *RedisServer) ReplicaOf(primary string) {
	s.t.Helper()
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		s.t.Fatalf("private: replica of %q: %v", primary, err)
	}
	s.do("REPLICAOF", host, port)
}

// Promote makes a replica a primary (REPLICAOF NO ONE), as a failover
// does: it keeps what it has replicated so far, which may lag the old
// primary, and accepts writes.
func (s *RedisServer) Promote() {
	s.t.Helper()
	s.do("REPLICAOF", "NO", "ONE")
	s.waitRole("master", testenv.OpTimeout)
}

// WaitSynced waits up to timeout until the replica is connected to its
// primary and has processed the primary's whole replication stream as it
// stood when WaitSynced was called; primary is the real primary's address
// (not a proxy's). It fails the test on timeout.
func (s *RedisServer) WaitSynced(primary string, timeout time.Duration) {
	s.t.Helper()
	ctx, cancel := testenv.OpContext(testenv.OpTimeout)
	defer cancel()
	info, err := launch.Info(ctx, primary, "replication")
	if err != nil {
		s.t.Fatalf("private: INFO replication on primary %s: %v", primary, err)
	}
	want, err := strconv.ParseInt(info["master_repl_offset"], 10, 64)
	if err != nil {
		s.t.Fatalf("private: master_repl_offset of %s: %q", primary, info["master_repl_offset"])
	}
	start := time.Now()
	for {
		r := s.Info("replication")
		got, _ := strconv.ParseInt(r["slave_repl_offset"], 10, 64)
		if r["master_link_status"] == "up" && got >= want {
			return
		}
		if time.Since(start) > testenv.Stretched(timeout) {
			s.t.Fatalf("private: replica %s not in sync with %s after %v: link %s, offset %d of %d",
				s.Addr(), primary, timeout, r["master_link_status"], got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLinkUp waits until the replica's link to its primary is up.
func (s *RedisServer) waitLinkUp(timeout time.Duration) {
	s.t.Helper()
	start := time.Now()
	for {
		r := s.Info("replication")
		if r["master_link_status"] == "up" {
			return
		}
		if time.Since(start) > testenv.Stretched(timeout) {
			s.t.Fatalf("private: replica %s: link to its primary %s after %v\n%s",
				s.Addr(), r["master_link_status"], timeout, launch.LogTail(s.logPath()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRole waits until INFO replication reports role.
func (s *RedisServer) waitRole(role string, timeout time.Duration) {
	s.t.Helper()
	start := time.Now()
	for {
		if r := s.Info("replication"); r["role"] == role {
			return
		}
		if time.Since(start) > testenv.Stretched(timeout) {
			s.t.Fatalf("private: %s did not become %s within %v", s.Addr(), role, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do runs one command on the server, failing the test on an error.
func (s *RedisServer) do(args ...string) string {
	s.t.Helper()
	ctx, cancel := testenv.OpContext(testenv.OpTimeout)
	defer cancel()
	reply, err := launch.Do(ctx, s.Addr(), args...)
	if err != nil {
		s.t.Fatalf("private: %v on %s: %v", args, s.Addr(), err)
	}
	return reply
}
