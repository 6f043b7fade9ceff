package workerid

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// lossOptions has the loss window of the tests of this file: one second,
// so that a server outlives it in moments.
var lossOptions = Options{Layout: sixBits, TTL: time.Second, Margin: 200 * time.Millisecond, RenewEvery: 300 * time.Millisecond}

// waitUptime waits until every server c reaches shows it has been up
// for d.
func waitUptime(t *testing.T, ctx context.Context, c redis.UniversalClient, d time.Duration) {
	t.Helper()
	up := func(c redis.Cmdable) error {
		for {
			info, err := c.Info(ctx, "server").Result()
			if err != nil {
				return err
			}
			_, rest, _ := strings.Cut(info, "uptime_in_seconds:")
			secs, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
			// A second less than it says: the pool counts it so (lossAge).
			if time.Duration(secs-1)*time.Second >= d {
				return nil
			}
			if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return up(c) })
	} else {
		err = up(c)
	}
	if err != nil {
		t.Fatalf("waiting for the server's uptime to reach %v: %v", d, err)
	}
}

// firstTake is the first take of a fresh namespace on p's server.
func firstTake(t *testing.T, ctx context.Context, p *Pool) taken {
	t.Helper()
	now := p.nowMs()
	tk, err := p.store.take(ctx, takeRequest{token: "first/1", holder: "first", ttl: p.opts.TTL.Milliseconds(),
		reserve: p.reserve(now), now: now})
	if err != nil || tk.worker < 0 {
		t.Fatalf("take: %+v, %v", tk, err)
	}
	return tk
}

// TestRedisLossSigns: the first take of a new namespace on a Redis server
// that has been up for longer than the loss window, and shows no sign of
// having lost data, opens no window: the fleet starts at once. Each sign
// that the server may have lost data (it started within the window; it
// was promoted from a replica; it ran FLUSHALL; it is a Cluster node,
// whose slots may come from other servers) opens the window, and each
// has a control: with that one sign unread, the take opens none. (What a
// missing window costs, duplicate IDs, TestRedisDataLoss and
// TestRedisFailoverToLaggingReplica show.) Each case checks the sign
// itself on the server first: the fault is met.
func TestRedisLossSigns(t *testing.T) {
	t.Parallel()
	type server struct {
		client redis.UniversalClient
		addr   string       // of a single server
		sign   func() error // nil if the server shows the sign
		pool   func(o Options, off defences) *Pool
	}
	single := func(t *testing.T, c *redis.Client, addr string) server {
		return server{client: c, addr: addr, pool: func(o Options, off defences) *Pool {
			return redisPoolWithout(t, addr, testenv.KeyPrefix(t), o, off)
		}}
	}
	infoHas := func(c redis.Cmdable, section, want string) func() error {
		return func() error {
			info, err := c.Info(context.Background(), section).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, want) {
				return fmt.Errorf("INFO %s has no %q", section, want)
			}
			return nil
		}
	}
	cases := []struct {
		name string
		sign defences // the defence that reads the sign, which the control switches off
		why  string
		// setup starts the server.
		setup func(t *testing.T, ctx context.Context) server
	}{
		{"up longer than the window", defences{}, "", func(t *testing.T, ctx context.Context) server {
			srv := private.StartRedis(t)
			waitUptime(t, ctx, srv.Client(), lossOptions.TTL)
			return single(t, srv.Client(), srv.Addr())
		}},
		{"started within the window", defences{noUptimeSign: true}, "restarted", func(t *testing.T, ctx context.Context) server {
			// A window of a minute, which the server just started is
			// within however loaded the machine is.
			srv := private.StartRedis(t)
			s := single(t, srv.Client(), srv.Addr())
			s.sign = func() error {
				if up, err := strconv.Atoi(srv.Info("server")["uptime_in_seconds"]); err != nil || up >= 60 {
					return fmt.Errorf("up for %d s (%v)", up, err)
				}
				return nil
			}
			return s
		}},
		{"promoted", defences{noPromotedSign: true}, "promoted", func(t *testing.T, ctx context.Context) server {
			master := private.StartRedis(t)
			replica := private.StartRedisReplica(t, master.Addr())
			replica.WaitSynced(master.Addr(), 30*time.Second)
			replica.Promote()
			waitUptime(t, ctx, replica.Client(), lossOptions.TTL)
			s := single(t, replica.Client(), replica.Addr())
			s.sign = func() error {
				if r2 := replica.Info("replication")["master_replid2"]; strings.Trim(r2, "0") == "" {
					return fmt.Errorf("master_replid2 %q", r2)
				}
				return nil
			}
			return s
		}},
		{"flushed", defences{noFlushSign: true}, "flushed", func(t *testing.T, ctx context.Context) server {
			srv := private.StartRedis(t)
			waitUptime(t, ctx, srv.Client(), lossOptions.TTL)
			if err := srv.Client().FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			s := single(t, srv.Client(), srv.Addr())
			s.sign = infoHas(srv.Client(), "commandstats", "cmdstat_flushall:")
			return s
		}},
		{"cluster", defences{noClusterSign: true}, "cluster", func(t *testing.T, ctx context.Context) server {
			c := testenv.RedisClusterClient(t)
			waitUptime(t, ctx, c, lossOptions.TTL)
			return server{client: c, sign: infoHas(c, "cluster", "cluster_enabled:1"), pool: func(o Options, off defences) *Pool {
				o = testOptions(t, o)
				o.KeyPrefix = testenv.KeyPrefix(t)
				p, err := redisWithout(c, o, off)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}}
		}},
	}
	for _, tc := range cases {
		for _, defended := range []bool{true, false} {
			if tc.sign == (defences{}) && !defended {
				continue
			}
			name, off := tc.name, defences{}
			if !defended {
				name, off = name+"/control: "+strings.Join(tc.sign.names(), ", ")+" off", tc.sign
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := testenv.Deadline(t, time.Minute)
				s := tc.setup(t, ctx)
				o := lossOptions
				if tc.why == "restarted" {
					o.TTL, o.Margin, o.RenewEvery = time.Minute, 0, 0
				}
				p := s.pool(o, off)
				if s.sign != nil {
					if err := s.sign(); err != nil {
						t.Fatalf("the server shows no sign of %s: %v: the fault was not met", tc.name, err)
					}
				}
				tk := firstTake(t, ctx, p)
				if tk.notBefore > 0 {
					t.Logf("first take: a window of %v, why %q", time.Duration(tk.notBefore-p.nowMs())*time.Millisecond, tk.why)
				} else {
					t.Logf("first take: no window")
				}
				opened := tk.notBefore > p.nowMs()
				switch {
				case tc.why == "" && opened:
					t.Fatalf("a server up for longer than the window, without a sign of lost data, opened a window (why %q)", tk.why)
				case tc.why != "" && defended && (!opened || tk.why != tc.why):
					t.Fatalf("no window, or another reason (%q), on a server that shows %s", tk.why, tc.why)
				case !defended && opened:
					t.Fatalf("control: with %s off, the take still opened a window (why %q): the sign is not what opens it",
						strings.Join(tc.sign.names(), ", "), tk.why)
				}
			})
		}
	}
}

// TestRedisStartWaitLogged: Acquire on a Redis server that has just
// started waits before the first ID of a new namespace, and says why in
// the log; on one that has been up for longer than the window it does not
// wait.
func TestRedisStartWaitLogged(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, time.Minute)
	srv := private.StartRedis(t)
	var log testenv.LogBuffer
	o := Options{Layout: sixBits, TTL: time.Minute, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	p := redisPool(t, srv.Addr(), testenv.KeyPrefix(t), o)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := p.Acquire(actx)
		done <- err
	}()
	waitFor(t, 30*time.Second, "the log line of the wait", func() bool {
		return strings.Contains(log.String(), "waiting before the first ID")
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Acquire returned a lease within the window of a server that had just started")
	}
	if line := log.String(); !strings.Contains(line, "started less than one TTL ago") {
		t.Errorf("the wait's log line does not say why:\n%s", line)
	}

	var later testenv.LogBuffer
	o.TTL, o.Logger = time.Second, slog.New(slog.NewTextHandler(&later, nil))
	waitUptime(t, ctx, srv.Client(), o.TTL)
	q := redisPool(t, srv.Addr(), testenv.KeyPrefix(t)+"later:", o)
	start := time.Now()
	l := acquire(t, q)
	if s := l.Status(); s.NotBefore.UnixMilli() > 0 || strings.Contains(later.String(), "waiting before the first ID") {
		t.Errorf("a new namespace on a server up for longer than the window waited (not before %v, %v):\n%s",
			s.NotBefore, time.Since(start), later.String())
	}
	closeLease(t, l)
}

// TestRedisLateTake: a take sent before Redis lost its data and run after
// (held up in the network, or resent by go-redis after the connection
// broke) carries a time from before the loss, and an owner that Redis
// forgot may have renewed after that time. Its loss window runs from the
// server's clock when that is later, so the new owner still starts after
// the forgotten owner stops. Here the take's time is two Margins before
// the holder's last renewal, and the server restarts without persistence
// in between. The control, whose window runs from the taker's time alone,
// lets the new owner issue while the old one may.
func TestRedisLateTake(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "defended", true: "control"}[control], func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Deadline(t, 2*time.Minute)
			srv := private.StartRedis(t)
			// A TTL that the restarted server's uptime stays well within,
			// however loaded the machine is.
			o := oneNumber
			o.TTL, o.Margin, o.RenewEvery = 30*time.Second, 2*time.Second, time.Second
			prefix := testenv.KeyPrefix(t)
			px := startProxy(t, srv.Addr())
			pa := redisPool(t, px.Addr(), prefix, o)
			trustRecord(t, pa)
			a := acquire(t, pa)
			old := a.Status()
			sent := old.LastRenewal.UnixMilli() - 2*o.Margin.Milliseconds()
			// The holder is cut off, and Redis forgets it.
			px.Cut()
			srv.Kill()
			srv.Restart()
			pb := redisPoolWithout(t, srv.Addr(), prefix, o, defences{noServerTime: control})
			tk, err := pb.store.take(ctx, takeRequest{token: "late/1", holder: "late", ttl: o.TTL.Milliseconds(),
				reserve: pb.reserve(sent), now: sent})
			if err != nil {
				t.Fatal(err)
			}
			if tk.worker != a.Worker() {
				t.Fatalf("the late take got number %d, want the forgotten holder's, %d", tk.worker, a.Worker())
			}
			// The fault met: the take ran on a server that forgot the
			// holder, and opened a loss window for it.
			if tk.notBefore == 0 || tk.why != "restarted" {
				t.Fatalf("the take after the restart opened no loss window (%+v)", tk)
			}
			floor, until := pb.floor(tk), old.ValidUntil.UnixMilli()
			t.Logf("the take sent %d ms before the holder's last renewal starts after %d; the holder may issue until %d",
				old.LastRenewal.UnixMilli()-sent, floor, until)
			switch {
			case !control && floor < until:
				t.Errorf("the new owner may issue from %d ms, %d ms before the forgotten owner stops", floor, until-floor)
			case control && floor >= until:
				t.Errorf("control: the window ran from the taker's time alone and still ended after the forgotten owner stops (%d >= %d)", floor, until)
			}
			// Cut off, its release fails, as a forgotten holder's would.
			_ = a.Close(ctx)
		})
	}
}
