package tokens

import (
	"context"
	"fmt"
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
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
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
// tokens.ratios turns them into ratios, each beside its goal.
func BenchmarkValidate(b *testing.B) {
	c := testenv.RedisClient(b)
	ctx := context.Background()
	gen := newGen(b)
	prefix := testenv.KeyPrefix(b)
	m := openManager(b, c, gen, Options{KeyPrefix: prefix})
	cached := openManager(b, c, gen, Options{KeyPrefix: prefix, CacheTTL: 10 * time.Second})
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
	m := openManager(b, c, gen, Options{})
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

// BenchmarkGracePaired validates, in every op and in alternating order,
// a token that Rotate replaced within the grace window and the token it
// was rotated to, on one goroutine, and reports their throughput ratio
// (time per Validate of the new token / time per Validate of the old) as
// "grace/validate": what serving a request that left with the old token
// costs, against serving it with the new one.
func BenchmarkGracePaired(b *testing.B) {
	c := testenv.RedisClient(b)
	ctx := context.Background()
	gen := newGen(b)
	m := openManager(b, c, gen, Options{RotationGrace: MaxRotationGrace})
	var oldNs, newNs atomic.Int64
	var olds, news []string
	rotated := time.Now()
	rotate := func() {
		olds, news = make([]string, benchTokens), make([]string, benchTokens)
		for i := range olds {
			olds[i], _ = issue(b, m, userID(b, gen), Metadata{})
			var err error
			if news[i], _, err = m.Rotate(ctx, olds[i]); err != nil {
				b.Fatal(err)
			}
		}
		rotated = time.Now()
	}
	rotate()
	parallel(b, 1, func(i int) error {
		if time.Since(rotated) > MaxRotationGrace/2 {
			b.StopTimer()
			rotate()
			b.StartTimer()
		}
		k := i % benchTokens
		validate := func(tok string, ns *atomic.Int64) func() error {
			return func() error {
				t0 := time.Now()
				_, err := m.Validate(ctx, tok)
				ns.Add(int64(time.Since(t0)))
				return err
			}
		}
		first, second := validate(olds[k], &oldNs), validate(news[k], &newNs)
		if i%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			return err
		}
		return second()
	})
	b.ReportMetric(float64(newNs.Load())/float64(oldNs.Load()), "grace/validate")
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
	m := openManager(b, c, gen, Options{CacheTTL: 10 * time.Second})
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
// index included: the INFO memory delta (used_memory) of a private
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
			srv := private.StartRedis(b)
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
			warm := userID(b, gen)
			issue(b, m, warm, Metadata{})
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
			tags := map[uint16]bool{slotTag(warm): true}
			for _, u := range ids {
				tags[slotTag(u)] = true
			}
			if n := probe.DBSize(ctx).Val(); n != users*perUser+1+int64(len(tags)) {
				b.Fatalf("%d keys, want %d sessions, one from the warm-up and %d indexes", n, users*perUser, len(tags))
			}
			b.ReportMetric(float64(after-before)/(users*perUser), "B/session")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// usedMemory returns the bytes c's server reports as used_memory.
func usedMemory(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	return infoInt(t, c, "memory", "used_memory")
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
	counted := openManager(b, c, gen, Options{KeyPrefix: prefix, CacheTTL: time.Minute})
	uncounted := openManager(b, c, gen, Options{KeyPrefix: prefix, CacheTTL: time.Minute})
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

// setIndexValidateScript is the baseline that BenchmarkValidateScripts
// holds validateScript against: the same check on a layout with a set per
// user as the index ("<prefix>{<tag>}u<user ID, 16 hex digits>", of
// decimal session IDs), whose key the script builds from the record's
// user bytes, because a token does not name its user. That key is not in
// KEYS, which Redis's rule on script keys forbids, and which the hash of
// each slot tag avoids. The script tells "no index here" apart from "not
// a member" so that a caller could ask again with the key declared.
//
// KEYS: session. ARGV: digest, decimal session ID.
const setIndexValidateScript = `
local v = redis.call('GET', KEYS[1])
if not v or #v < 28 or string.sub(v, 1, 16) ~= ARGV[1] then
  return false
end
local a, b, c, d, e, f, g, h = string.byte(v, 17, 24)
local idx = string.sub(KEYS[1], 1, #KEYS[1] - 12) .. string.format('u%08x%08x',
  ((a * 256 + b) * 256 + c) * 256 + d, ((e * 256 + f) * 256 + g) * 256 + h)
local member = redis.pcall('SISMEMBER', idx, ARGV[2])
if member == 0 and redis.call('EXISTS', idx) == 1 then return false end
if member ~= 1 then return {v} end
return v
`

// BenchmarkValidateScripts times, in every op and in rotating order on the
// same client, a raw GET of a session key and other forms of Validate's
// read of the same session:
//
//   - hash: validateScript by EVALSHA, as Validate runs it: it receives
//     the session key and its tag's index and finds the entry in the
//     user's field of that hash;
//   - set: setIndexValidateScript by EVALSHA, on a copy of the session's
//     index entry in a set per user;
//   - fcall: validateScript as a Redis function (FUNCTION LOAD, FCALL),
//     the alternative to EVALSHA;
//   - pipeline: no script, a GET of the key and an HEXISTS of a field per
//     session in one round trip, the read of a layout that kept a field
//     per session in the index (which would cost a hash field of Redis
//     memory per session).
//
// It reports each as a throughput ratio to the GET (time of GETs / time of
// the other: 1 is as fast as a GET), and hash against set, with 1 and 32
// goroutines.
func BenchmarkValidateScripts(b *testing.B) {
	c := testenv.RedisClient(b)
	ctx := context.Background()
	gen := newGen(b)
	m := openManager(b, c, gen, Options{})
	setIndex := redis.NewScript(setIndexValidateScript)
	fn := "validate_" + strings.NewReplacer(":", "_", "/", "_", "-", "_", "=", "_").Replace(m.opts.KeyPrefix)
	library := "#!lua name=" + fn + "\nredis.register_function('" + fn + "', function(KEYS, ARGV)" + validateScript + "end)"
	if err := c.FunctionLoad(ctx, library).Err(); err != nil {
		b.Fatalf("FUNCTION LOAD: %v", err)
	}
	b.Cleanup(func() { _ = c.FunctionDelete(context.Background(), fn).Err() })
	type session struct{ key, index, digest, sid, decimal, perSession string }
	sessions := make([]session, benchTokens)
	for i := range sessions {
		tok, s := issue(b, m, userID(b, gen), Metadata{})
		t, ok := parseToken(m.opts.TokenPrefix, tok)
		if !ok {
			b.Fatal("an issued token does not parse")
		}
		d := m.digest(&t)
		key := m.keys.session(t.tag, t.session)
		tag := string(appendBase62(nil, uint64(t.tag), tagDigits))
		x := session{key, m.keys.index(t.tag), string(d[:digestLen]), entryID(t.session), strconv.FormatInt(int64(s.ID), 10),
			m.opts.KeyPrefix + "{" + tag + "}p"}
		sessions[i] = x
		set := fmt.Sprintf("%s{%s}u%016x", m.opts.KeyPrefix, tag, uint64(s.UserID))
		if err := c.SAdd(ctx, set, x.decimal).Err(); err != nil {
			b.Fatal(err)
		}
		if err := c.HSet(ctx, x.perSession, x.sid, "").Err(); err != nil {
			b.Fatal(err)
		}
	}
	x := sessions[0]
	for name, run := range map[string]*redis.Cmd{
		"hash":  m.s.validate.Run(ctx, c, []string{x.key, x.index}, x.digest, x.sid),
		"set":   setIndex.Run(ctx, c, []string{x.key}, x.digest, x.decimal),
		"fcall": c.FCall(ctx, fn, []string{x.key, x.index}, x.digest, x.sid),
	} {
		if v, err := run.Text(); err != nil || len(v) != headLen {
			b.Fatalf("%s script on a valid session: %q, %v; want its %d-byte record", name, v, err, headLen)
		}
	}
	for _, g := range []int{1, 32} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			var getNs, hashNs, setNs, fcallNs, pipeNs atomic.Int64
			timed := func(ns *atomic.Int64, f func() error) func() error {
				return func() error {
					t0 := time.Now()
					err := f()
					ns.Add(int64(time.Since(t0)))
					return err
				}
			}
			parallel(b, g, func(i int) error {
				x := sessions[i%benchTokens]
				calls := [5]func() error{
					timed(&getNs, func() error { return c.Get(ctx, x.key).Err() }),
					timed(&hashNs, func() error {
						return m.s.validate.Run(ctx, c, []string{x.key, x.index}, x.digest, x.sid).Err()
					}),
					timed(&setNs, func() error { return setIndex.Run(ctx, c, []string{x.key}, x.digest, x.decimal).Err() }),
					timed(&fcallNs, func() error { return c.FCall(ctx, fn, []string{x.key, x.index}, x.digest, x.sid).Err() }),
					timed(&pipeNs, func() error {
						p := c.Pipeline()
						get := p.Get(ctx, x.key)
						member := p.HExists(ctx, x.perSession, x.sid)
						if _, err := p.Exec(ctx); err != nil {
							return err
						}
						if len(get.Val()) != headLen || !member.Val() {
							return fmt.Errorf("pipeline: %d-byte record, member %v", len(get.Val()), member.Val())
						}
						return nil
					}),
				}
				for k := range calls {
					if err := calls[(i+k)%len(calls)](); err != nil {
						return err
					}
				}
				return nil
			})
			get := float64(getNs.Load())
			b.ReportMetric(get/float64(hashNs.Load()), "hash/get")
			b.ReportMetric(get/float64(setNs.Load()), "set/get")
			b.ReportMetric(float64(setNs.Load())/float64(hashNs.Load()), "hash/set")
			b.ReportMetric(get/float64(fcallNs.Load()), "fcall/get")
			b.ReportMetric(get/float64(pipeNs.Load()), "pipeline/get")
		})
	}
}

// BenchmarkOps measures each Manager operation on one goroutine against
// the raw Redis commands it replaces, paired: every op runs the operation
// and the raw commands back to back, in alternating order, on one client
// of a real redis-server. The raw commands write and read keys of their
// own, of the same sizes, in the fewest round trips a client that knew
// the layout would take, without a script: so they are the floor of each
// operation, in time and in round trips. It reports
//
//   - op/raw: the throughput ratio, time of the raw commands / time of the
//     operation (1: as fast as the raw commands);
//   - roundtrips/op: the operation's round trips, counted by a hook on the
//     client (a command or a pipeline is one);
//   - raw-roundtrips/op: those of the raw commands, the least the
//     operation needs;
//   - op-ns/op and raw-ns/op: the time of each side.
//
// The raw commands are: for Issue, a pipeline of SET NX PX of the record,
// HSET of the user's field grown by one entry and PEXPIRE of the index;
// for Validate, a GET of the session key; for Rotate, a pipeline of GET of
// the old key, SET NX PX of the new, DEL of the old and HSET of the field;
// for Revoke and RevokeSession, a pipeline of DEL of the key and HDEL of
// the field (the user's one session); for RevokeAll, an HGET of the field,
// then a pipeline of HDEL of it and DEL of the keys it names; for List, an
// HGET of the field, then an MGET of the keys it names.
func BenchmarkOps(b *testing.B) {
	c := testenv.RedisClient(b)
	hook := &roundTrips{}
	c.AddHook(hook)
	ctx := context.Background()
	gen := newGen(b)
	m := openManager(b, c, gen, Options{})
	raw := keys{prefix: m.opts.KeyPrefix + "raw:"}
	ttl := m.opts.IdleTimeout
	rec := string(make([]byte, headLen))
	var rawSID atomic.Int64 // session IDs of the raw keys
	rawSession := func(user idtype.ID) (key, entry string) {
		sid := idtype.ID(rawSID.Add(1))
		return raw.session(slotTag(user), sid), entryID(sid) + "\x00\x01\x02\x03"
	}
	users := make([]idtype.ID, 10_000)
	for i := range users {
		users[i] = userID(b, gen)
	}
	// Load every script.
	tok, s := issue(b, m, users[0], Metadata{})
	if _, err := m.Validate(ctx, tok); err != nil {
		b.Fatal(err)
	}
	if tok, _, err := m.Rotate(ctx, tok); err != nil || m.Revoke(ctx, tok) != nil {
		b.Fatal("rotate and revoke", err)
	}
	if _, err := m.RevokeSession(ctx, users[0], s.ID); err != nil {
		b.Fatal(err)
	}
	issue(b, m, users[0], Metadata{})
	if _, err := m.List(ctx, users[0]); err != nil {
		b.Fatal(err)
	}
	if _, err := m.RevokeAll(ctx, users[0]); err != nil {
		b.Fatal(err)
	}

	b.Run("issue", func(b *testing.B) {
		fields := map[idtype.ID]string{}
		pairOps(b, hook, nil, func(i int) error {
			_, _, err := m.Issue(ctx, users[i%len(users)], Metadata{})
			return err
		}, func(i int) error {
			u := users[i%len(users)]
			key, entry := rawSession(u)
			fields[u] += entry
			index := raw.index(slotTag(u))
			p := c.Pipeline()
			p.SetArgs(ctx, key, rec, redis.SetArgs{Mode: "NX", TTL: ttl})
			p.HSet(ctx, index, userField(u), fields[u])
			p.PExpire(ctx, index, ttl)
			_, err := p.Exec(ctx)
			return err
		})
	})

	b.Run("validate", func(b *testing.B) {
		toks := make([]string, benchTokens)
		keys := make([]string, benchTokens)
		for i := range toks {
			var s Session
			toks[i], s = issue(b, m, users[i], Metadata{})
			keys[i] = m.keys.session(slotTag(s.UserID), s.ID)
		}
		pairOps(b, hook, nil, func(i int) error {
			_, err := m.Validate(ctx, toks[i%benchTokens])
			return err
		}, func(i int) error {
			return c.Get(ctx, keys[i%benchTokens]).Err()
		})
	})

	b.Run("rotate", func(b *testing.B) {
		toks := make([]string, benchTokens)
		rawKeys := make([]string, benchTokens)
		for i := range toks {
			u := userID(b, gen)
			toks[i], _ = issue(b, m, u, Metadata{})
			rawKeys[i], _ = rawSession(u)
			if err := c.Set(ctx, rawKeys[i], rec, ttl).Err(); err != nil {
				b.Fatal(err)
			}
		}
		pairOps(b, hook, nil, func(i int) error {
			var err error
			toks[i%benchTokens], _, err = m.Rotate(ctx, toks[i%benchTokens])
			return err
		}, func(i int) error {
			u := users[i%len(users)]
			key, entry := rawSession(u)
			p := c.Pipeline()
			p.Get(ctx, rawKeys[i%benchTokens])
			p.SetArgs(ctx, key, rec, redis.SetArgs{Mode: "NX", TTL: ttl})
			p.Del(ctx, rawKeys[i%benchTokens])
			p.HSet(ctx, raw.index(slotTag(u)), userField(u), entry)
			_, err := p.Exec(ctx)
			rawKeys[i%benchTokens] = key
			return err
		})
	})

	// One session of a fresh user each op, and one raw one.
	type one struct {
		user   idtype.ID
		tok    string
		s      Session
		rawKey string
	}
	fresh := func(x *one) func(int) error {
		return func(int) error {
			x.user = userID(b, gen)
			x.tok, x.s = issue(b, m, x.user, Metadata{})
			var entry string
			x.rawKey, entry = rawSession(x.user)
			p := c.Pipeline()
			p.Set(ctx, x.rawKey, rec, ttl)
			p.HSet(ctx, raw.index(slotTag(x.user)), userField(x.user), entry)
			_, err := p.Exec(ctx)
			return err
		}
	}
	rawRevoke := func(x *one) func(int) error {
		return func(int) error {
			p := c.Pipeline()
			p.Del(ctx, x.rawKey)
			p.HDel(ctx, raw.index(slotTag(x.user)), userField(x.user))
			_, err := p.Exec(ctx)
			return err
		}
	}
	b.Run("revoke", func(b *testing.B) {
		var x one
		pairOps(b, hook, fresh(&x), func(int) error { return m.Revoke(ctx, x.tok) }, rawRevoke(&x))
	})
	b.Run("revoke-session", func(b *testing.B) {
		var x one
		pairOps(b, hook, fresh(&x), func(int) error {
			if ok, err := m.RevokeSession(ctx, x.user, x.s.ID); !ok || err != nil {
				return fmt.Errorf("RevokeSession = %v, %v", ok, err)
			}
			return nil
		}, rawRevoke(&x))
	})

	// rawSessions writes n raw sessions of a user; rawRead reads the
	// user's raw field and returns the keys it names.
	rawSessions := func(user idtype.ID, n int) error {
		p := c.Pipeline()
		var field string
		for range n {
			key, entry := rawSession(user)
			p.Set(ctx, key, rec, ttl)
			field += entry
		}
		p.HSet(ctx, raw.index(slotTag(user)), userField(user), field)
		_, err := p.Exec(ctx)
		return err
	}
	rawRead := func(user idtype.ID) ([]string, error) {
		v, err := c.HGet(ctx, raw.index(slotTag(user)), userField(user)).Result()
		var keys []string
		for _, sid := range parseEntries(v) {
			keys = append(keys, raw.session(slotTag(user), sid))
		}
		return keys, err
	}
	for _, n := range []int{1, 100} {
		b.Run("revoke-all/sessions="+strconv.Itoa(n), func(b *testing.B) {
			m := openManager(b, c, gen, Options{KeyPrefix: m.opts.KeyPrefix, MaxSessions: n})
			var user idtype.ID
			pairOps(b, hook, func(int) error {
				user = userID(b, gen)
				for range n {
					issue(b, m, user, Metadata{})
				}
				return rawSessions(user, n)
			}, func(int) error {
				if ended, err := m.RevokeAll(ctx, user); ended != n || err != nil {
					return fmt.Errorf("RevokeAll = %d, %v; want %d", ended, err, n)
				}
				return nil
			}, func(int) error {
				keys, err := rawRead(user)
				if err != nil {
					return err
				}
				p := c.Pipeline()
				p.HDel(ctx, raw.index(slotTag(user)), userField(user))
				p.Del(ctx, keys...)
				_, err = p.Exec(ctx)
				return err
			})
		})
	}

	b.Run("list/sessions=10", func(b *testing.B) {
		user := userID(b, gen)
		for range 10 {
			issue(b, m, user, Metadata{})
		}
		if err := rawSessions(user, 10); err != nil {
			b.Fatal(err)
		}
		pairOps(b, hook, nil, func(int) error {
			if list, err := m.List(ctx, user); len(list) != 10 || err != nil {
				return fmt.Errorf("List = %d sessions, %v; want 10", len(list), err)
			}
			return nil
		}, func(int) error {
			keys, err := rawRead(user)
			if err != nil {
				return err
			}
			return c.MGet(ctx, keys...).Err()
		})
	})
}

// pairOps runs setup (if any), then op and raw, in alternating order, in
// every op, and reports what BenchmarkOps says, counting round trips on
// hook.
func pairOps(b *testing.B, hook *roundTrips, setup, op, raw func(i int) error) {
	var opNs, rawNs time.Duration
	var opTrips, rawTrips, n int
	timed := func(f func(int) error, i int, ns *time.Duration, trips *int) {
		hook.take()
		t0 := time.Now()
		if err := f(i); err != nil {
			b.Fatal(err)
		}
		*ns += time.Since(t0)
		*trips += len(hook.take())
	}
	for i := 0; b.Loop(); i++ {
		if setup != nil {
			if err := setup(i); err != nil {
				b.Fatal(err)
			}
		}
		if i%2 == 0 {
			timed(op, i, &opNs, &opTrips)
			timed(raw, i, &rawNs, &rawTrips)
		} else {
			timed(raw, i, &rawNs, &rawTrips)
			timed(op, i, &opNs, &opTrips)
		}
		n++
	}
	b.ReportMetric(float64(rawNs)/float64(opNs), "op/raw")
	b.ReportMetric(float64(opTrips)/float64(n), "roundtrips/op")
	b.ReportMetric(float64(rawTrips)/float64(n), "raw-roundtrips/op")
	b.ReportMetric(float64(opNs)/float64(n), "op-ns/op")
	b.ReportMetric(float64(rawNs)/float64(n), "raw-ns/op")
}
