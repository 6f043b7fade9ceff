package tokens

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// benchTokens is how many sessions the throughput benchmarks cycle through.
const benchTokens = 1000

// parallel runs body b.N times over all goroutines: in the benchmark's
// goroutine for 1, else with RunParallel and SetParallelism chosen so that
// exactly that many goroutines run (GOMAXPROCS × parallelism).
func parallel(b *testing.B, goroutines int, body func(i int) error) {
	if goroutines == 1 {
		for i := 0; b.Loop(); i++ {
			if err := body(i); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((goroutines + procs - 1) / procs)
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			if err := body(i); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkValidate compares, on the same client of the same real
// redis-server, with 1 and 32 goroutines:
//
//   - get: a raw go-redis GET of the session keys themselves, values of
//     exactly the size Validate reads;
//   - redis: Validate without cache (no refresh is due);
//   - cached: Validate with CacheTTL, served from memory.
//
// tokens.ratios turns them into the issue's ratios.
func BenchmarkValidate(b *testing.B) {
	c := testenv.RedisClient(b)
	ctx := context.Background()
	gen := newGen(b)
	prefix := testenv.KeyPrefix(b)
	m := newManager(b, c, gen, Options{KeyPrefix: prefix})
	cached := newManager(b, c, gen, Options{KeyPrefix: prefix, CacheTTL: 10 * time.Second})
	toks := make([]string, benchTokens)
	keys := make([]string, benchTokens)
	for i := range toks {
		var s Session
		toks[i], s = issue(b, m, userID(b, gen), Metadata{})
		keys[i] = m.keys.session(slotTag(s.UserID), s.ID)
	}
	if n := len(c.Get(ctx, keys[0]).Val()); n != headLen {
		b.Fatalf("a session record is %d bytes, want %d", n, headLen)
	}
	for _, g := range []int{1, 32} {
		name := "goroutines=" + strconv.Itoa(g)
		b.Run("get/"+name, func(b *testing.B) {
			parallel(b, g, func(i int) error {
				return c.Get(ctx, keys[i%benchTokens]).Err()
			})
		})
		b.Run("redis/"+name, func(b *testing.B) {
			parallel(b, g, func(i int) error {
				_, err := m.Validate(ctx, toks[i%benchTokens])
				return err
			})
		})
		b.Run("cached/"+name, func(b *testing.B) {
			for _, tok := range toks {
				if _, err := cached.Validate(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
			parallel(b, g, func(i int) error {
				_, err := cached.Validate(ctx, toks[i%benchTokens])
				return err
			})
		})
	}
}

// BenchmarkValidatePaired runs a raw GET and a Validate of the same
// session in every op, in alternating order, on the same client, and
// reports their throughput ratio (GET time / Validate time) as
// "validate/get". Both sides see the same moments of a noisy machine, so
// the ratio is steadier than one taken between separate benchmarks.
func BenchmarkValidatePaired(b *testing.B) {
	c := testenv.RedisClient(b)
	ctx := context.Background()
	gen := newGen(b)
	m := newManager(b, c, gen, Options{})
	toks := make([]string, benchTokens)
	keys := make([]string, benchTokens)
	for i := range toks {
		var s Session
		toks[i], s = issue(b, m, userID(b, gen), Metadata{})
		keys[i] = m.keys.session(slotTag(s.UserID), s.ID)
	}
	for _, g := range []int{1, 32} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			var getNs, validateNs atomic.Int64
			parallel(b, g, func(i int) error {
				k := i % benchTokens
				get := func() error {
					t0 := time.Now()
					err := c.Get(ctx, keys[k]).Err()
					getNs.Add(int64(time.Since(t0)))
					return err
				}
				validate := func() error {
					t0 := time.Now()
					_, err := m.Validate(ctx, toks[k])
					validateNs.Add(int64(time.Since(t0)))
					return err
				}
				first, second := get, validate
				if i%2 == 1 {
					first, second = validate, get
				}
				if err := first(); err != nil {
					return err
				}
				return second()
			})
			b.ReportMetric(float64(getNs.Load())/float64(validateNs.Load()), "validate/get")
		})
	}
}

// BenchmarkCachedPaired is BenchmarkValidatePaired for the cache, with one
// goroutine: every op times one raw GET and a block of 64 cached
// Validates, and it reports the throughput ratio (time per GET / time per
// cached Validate) as "cached/get". There is no 32-goroutine variant: with
// more goroutines than cores, the CPU-bound blocks hold up the GETs'
// wake-ups, and the ratio of latencies stops meaning a ratio of
// throughputs.
func BenchmarkCachedPaired(b *testing.B) {
	const block = 64
	c := testenv.RedisClient(b)
	ctx := context.Background()
	gen := newGen(b)
	m := newManager(b, c, gen, Options{CacheTTL: 10 * time.Second})
	toks := make([]string, benchTokens)
	keys := make([]string, benchTokens)
	for i := range toks {
		var s Session
		toks[i], s = issue(b, m, userID(b, gen), Metadata{})
		keys[i] = m.keys.session(slotTag(s.UserID), s.ID)
		if _, err := m.Validate(ctx, toks[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("goroutines=1", func(b *testing.B) {
		var getNs, cachedNs time.Duration
		parallel(b, 1, func(i int) error {
			t0 := time.Now()
			if err := c.Get(ctx, keys[i%benchTokens]).Err(); err != nil {
				return err
			}
			t1 := time.Now()
			for j := range block {
				if _, err := m.Validate(ctx, toks[(i+j)%benchTokens]); err != nil {
					return err
				}
			}
			getNs += t1.Sub(t0)
			cachedNs += time.Since(t1)
			return nil
		})
		b.ReportMetric(float64(getNs)*block/float64(cachedNs), "cached/get")
	})
}

// BenchmarkIssue measures Issue, one round trip, against the real server.
func BenchmarkIssue(b *testing.B) {
	c := testenv.RedisClient(b)
	gen := newGen(b)
	m := newManager(b, c, gen, Options{})
	users := make([]idtype.ID, benchTokens)
	for i := range users {
		users[i] = userID(b, gen)
	}
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if _, _, err := m.Issue(ctx, users[i%benchTokens], Metadata{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseToken measures the checks Validate makes before any round
// trip.
func BenchmarkParseToken(b *testing.B) {
	s := (&token{session: 1863486340915077120, tag: 517}).format("snk")
	for b.Loop() {
		if _, ok := parseToken("snk", s); !ok {
			b.Fatal("rejected")
		}
	}
}

// BenchmarkSessionMemory reports Redis memory per live session, the
// user's index included: the INFO memory delta (used_memory) of a private
// redis-server over 100,000 sessions of 10,000 users, issued through
// Manager.Issue with the default key prefix. "bare" sessions have no
// metadata; "metadata" ones a device name, a 70-byte user agent and an
// IPv4 address. It ignores b.N: one fill is the measurement.
func BenchmarkSessionMemory(b *testing.B) {
	const users, perUser = 10_000, 10
	for _, tc := range []struct {
		name string
		meta Metadata
	}{
		{"bare", Metadata{}},
		{"metadata", Metadata{
			Device:    "Anna's iPhone",
			UserAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) Snow/4.2.1 (1234)",
			IP:        "203.0.113.77",
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := testenv.StartRedis(b)
			probe := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1})
			defer probe.Close()
			fill := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32})
			gen := newGen(b)
			m, err := New(fill, gen, Options{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			// Load the script and open the probe's connection first.
			issue(b, m, userID(b, gen), Metadata{})
			before := usedMemory(b, probe)

			ids := make([]idtype.ID, users)
			for i := range ids {
				ids[i] = userID(b, gen)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= users*perUser {
							return
						}
						if _, _, err := m.Issue(ctx, ids[i%users], tc.meta); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			// Close the fill's 32 connections, so that their buffers are
			// not counted, and wait until the server has let them go.
			fill.Close()
			for deadline := time.Now().Add(10 * time.Second); ; {
				info := probe.Info(ctx, "clients").Val()
				if strings.Contains(info, "connected_clients:1\r") || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			after := usedMemory(b, probe)
			if n := probe.DBSize(ctx).Val(); n != users*perUser+users+2 {
				b.Fatalf("%d keys, want %d sessions + %d indexes + 2 from the warm-up", n, users*perUser, users)
			}
			b.ReportMetric(float64(after-before)/(users*perUser), "B/session")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func usedMemory(b testing.TB, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no used_memory in INFO memory")
	return 0
}

// BenchmarkStatsPaired measures what Stats costs the hottest path, a
// cached Validate, whose one addition is the count of hits: every op
// times a block of 64 cached Validates on a Manager that counts and a
// block on one that does not (its cache's uncounted switch), back to
// back in alternating order, over the same tokens, and it reports the
// median over the ops of the time ratio counted/uncounted as
// "counted/uncounted" (1.00: no cost). The median, not the ratio of
// sums: a block that the scheduler stops for a time slice (another
// goroutine's, or another process's on a shared machine) costs a
// thousand blocks' time, and which side it lands on is chance. With 32
// goroutines, blocks of all goroutines run interleaved on the cores, so
// that the hit counters' cache lines are contended as in a server.
func BenchmarkStatsPaired(b *testing.B) {
	const block = 64
	c := testenv.RedisClient(b)
	ctx := context.Background()
	gen := newGen(b)
	prefix := testenv.KeyPrefix(b)
	counted := newManager(b, c, gen, Options{KeyPrefix: prefix, CacheTTL: time.Minute})
	uncounted := newManager(b, c, gen, Options{KeyPrefix: prefix, CacheTTL: time.Minute})
	uncounted.cache.uncounted = true
	toks := make([]string, benchTokens)
	for i := range toks {
		toks[i], _ = issue(b, counted, userID(b, gen), Metadata{})
		for _, m := range []*Manager{counted, uncounted} {
			if _, err := m.Validate(ctx, toks[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, g := range []int{1, 32} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			var mu sync.Mutex
			var ratios []float64
			parallel(b, g, func(i int) error {
				run := func(m *Manager) (time.Duration, error) {
					t0 := time.Now()
					for j := range block {
						if _, err := m.Validate(ctx, toks[(i+j)%benchTokens]); err != nil {
							return 0, err
						}
					}
					return time.Since(t0), nil
				}
				first, second := counted, uncounted
				if i%2 == 1 {
					first, second = second, first
				}
				d1, err := run(first)
				if err != nil {
					return err
				}
				d2, err := run(second)
				if err != nil {
					return err
				}
				if first == uncounted {
					d1, d2 = d2, d1
				}
				mu.Lock()
				ratios = append(ratios, float64(d1)/float64(d2))
				mu.Unlock()
				return nil
			})
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "counted/uncounted")
			if hits := counted.Stats().CacheHits; hits == 0 || uncounted.Stats().CacheHits != 0 {
				b.Fatalf("hits counted %d, uncounted %d: the switch does not work", hits, uncounted.Stats().CacheHits)
			}
		})
	}
}

// BenchmarkValidateScripts times, in every op and in rotating order on the
// same client, a raw GET of a session key and the two forms of Validate's
// read: "current", the script Validate runs, which receives the session
// key alone and builds the user's index key from the record; and
// "strict", the script that receives both keys (validateIndexedScript,
// Validate's second try today), which is what Validate would run once a
// token names its user's index. It reports each as a throughput ratio to
// the GET (time of GETs / time of the script: 1 is as fast as a GET), and
// strict against current, with 1 and 32 goroutines.
func BenchmarkValidateScripts(b *testing.B) {
	c := testenv.RedisClient(b)
	ctx := context.Background()
	gen := newGen(b)
	m := newManager(b, c, gen, Options{})
	type session struct{ key, index, digest, sid string }
	sessions := make([]session, benchTokens)
	for i := range sessions {
		tok, s := issue(b, m, userID(b, gen), Metadata{})
		t, ok := parseToken(m.opts.TokenPrefix, tok)
		if !ok {
			b.Fatal("an issued token does not parse")
		}
		d := m.digest(&t)
		key := m.keys.session(t.tag, t.session)
		sessions[i] = session{key, m.keys.index(t.tag, s.UserID), string(d[:digestLen]), m.keys.sessionID(key)}
	}
	s := sessions[0]
	for name, run := range map[string]*redis.Cmd{
		"current": m.s.validate.Run(ctx, c, []string{s.key}, s.digest, s.sid),
		"strict":  m.s.validateIndexed.Run(ctx, c, []string{s.key, s.index}, s.digest, s.sid),
	} {
		if v, err := run.Text(); err != nil || len(v) != headLen {
			b.Fatalf("%s script on a valid session: %q, %v; want its %d-byte record", name, v, err, headLen)
		}
	}
	for _, g := range []int{1, 32} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			var getNs, currentNs, strictNs atomic.Int64
			parallel(b, g, func(i int) error {
				s := sessions[i%benchTokens]
				calls := [3]func() error{
					func() error {
						t0 := time.Now()
						err := c.Get(ctx, s.key).Err()
						getNs.Add(int64(time.Since(t0)))
						return err
					},
					func() error {
						t0 := time.Now()
						err := m.s.validate.Run(ctx, c, []string{s.key}, s.digest, s.sid).Err()
						currentNs.Add(int64(time.Since(t0)))
						return err
					},
					func() error {
						t0 := time.Now()
						err := m.s.validateIndexed.Run(ctx, c, []string{s.key, s.index}, s.digest, s.sid).Err()
						strictNs.Add(int64(time.Since(t0)))
						return err
					},
				}
				for k := range 3 {
					if err := calls[(i+k)%3](); err != nil {
						return err
					}
				}
				return nil
			})
			b.ReportMetric(float64(getNs.Load())/float64(currentNs.Load()), "current/get")
			b.ReportMetric(float64(getNs.Load())/float64(strictNs.Load()), "strict/get")
			b.ReportMetric(float64(currentNs.Load())/float64(strictNs.Load()), "strict/current")
		})
	}
}
