package private_test

import (
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/recorder"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestMissingServerSkipsOrFails: every helper that needs a server, shared
// (testenv) or private, skips its test when the server is missing, and
// fails it when CI is true, saying how to get the servers.
func TestMissingServerSkipsOrFails(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	helpers := map[string]func(testing.TB){
		"Postgres":           func(t testing.TB) { testenv.Postgres(t) },
		"Redis":              func(t testing.TB) { testenv.Redis(t) },
		"RedisCluster":       func(t testing.TB) { testenv.RedisClusterClient(t) },
		"StartRedis":         func(t testing.TB) { private.StartRedis(t) },
		"StartRedisCluster":  func(t testing.TB) { private.StartRedisCluster(t, 3) },
		"StartRedisSentinel": func(t testing.TB) { private.StartRedisSentinel(t, "127.0.0.1:6379") },
	}
	for _, ci := range []string{"", "false", "true", "1"} {
		for name, helper := range helpers {
			t.Run(name+"/CI="+ci, func(t *testing.T) {
				t.Setenv("CI", ci)
				for _, v := range []string{testenv.EnvPostgres, testenv.EnvRedis, testenv.EnvRedisCluster, testenv.EnvRedisServer} {
					t.Setenv(v, "")
				}
				t.Setenv("PATH", t.TempDir()) // no redis-server to be found
				r := recorder.New(t)
				r.Run(func() { helper(r) })
				wantFail := ci == "true" || ci == "1"
				skipped, _ := r.SkipMessage()
				failed := strings.Join(r.Errors(), "\n")
				got := skipped
				if wantFail {
					got = failed
				}
				if got == "" {
					t.Fatalf("CI=%q: want %s, got skipped=%q failed=%q",
						ci, map[bool]string{true: "failure", false: "skip"}[wantFail], skipped, failed)
				}
				if !strings.Contains(got, "make test") {
					t.Errorf("message does not say how to get the servers: %q", got)
				}
			})
		}
	}
}
