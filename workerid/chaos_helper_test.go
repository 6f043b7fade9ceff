package workerid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/history"
)

// The chaos helper is a generator process of the chaos tests: this test
// binary, run again by chaos.StartHelper. It leases a number, issues IDs
// and appends them to its ID file, gives the number back now and then
// and leases again, and starts over whenever its lease is lost, until its
// standard input closes; then it closes its lease and exits. Its
// arguments are a chaosArgs (see helperArgs).
//
// SIGUSR1 stops its clock (a pausingClock) until its lease has a renewal
// confirmed or it holds another: a test that sends it when another
// process takes this one's number makes this one, once it has the number
// back, go on from that moment, through the milliseconds the other used,
// however long the machine took to get it there.
const chaosHelper = "chaos-issuer"

// chaosArgs are the chaos helper's arguments.
type chaosArgs struct {
	Store  string // redis, cluster or postgres
	Target string // Redis address, cluster node addresses (comma-separated), or PostgreSQL URL
	Prefix string // Redis key prefix
	Out    string // the ID file
	Offset time.Duration
	// Bits is the layout's worker bits (number 1023 aside, every number
	// is leased).
	Bits int
	// TTL, Margin and RenewEvery are the pool's.
	TTL, Margin, RenewEvery time.Duration
	// Hold is how long it keeps a lease before giving it back, drawn
	// between the two; 0, 0 keeps it until it is lost.
	Hold [2]time.Duration
	// Pause is how long it waits before leasing again, drawn between the
	// two.
	Pause [2]time.Duration
	Seed  int64 // seeds its choices of hold and pause times
	// Off names the defences its pool switches off (defences.names): a
	// control run.
	Off []string
	// Status is a file it keeps "<worker> <confirmed renewals>" in, for
	// the test to see renewals land ("-1 0" without a lease).
	Status string
}

// chaosIssuer is the chaos helper's body.
func chaosIssuer() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fail := func(err error) int {
		log.Error("chaos helper", "error", err)
		return 1
	}
	var args chaosArgs
	if err := readHelperArgs(&args); err != nil {
		return fail(err)
	}
	off, err := defencesNamed(args.Off)
	if err != nil {
		return fail(err)
	}
	hold, pause := args.Hold, args.Pause
	rng := chaos.Rand(args.Seed)
	between := func(r [2]time.Duration) time.Duration {
		if r[1] <= r[0] {
			return r[0]
		}
		return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])))
	}

	clock := &pausingClock{Clock: offsetClock{idtype.SystemClock(), args.Offset}}
	opts := Options{
		Layout:    idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: uint(args.Bits), SequenceBits: 12},
		Namespace: "chaos", TTL: args.TTL, Margin: args.Margin, RenewEvery: args.RenewEvery,
		Clock: clock, Logger: log,
		Holder: fmt.Sprintf("chaos-%d", os.Getpid()), KeyPrefix: args.Prefix,
	}
	var pool *Pool
	switch args.Store {
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: args.Target}) // go-redis's default retries
		defer rdb.Close()
		pool, err = redisWithout(rdb, opts, off)
	case "cluster":
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(args.Target, ",")})
		defer rdb.Close()
		pool, err = redisWithout(rdb, opts, off)
	case "postgres":
		var db *sql.DB
		if db, err = sql.Open("pgx", args.Target); err != nil {
			return fail(err)
		}
		defer db.Close()
		pool, err = postgresWithout(db, opts, off)
	default:
		err = fmt.Errorf("store %q", args.Store)
	}
	if err != nil {
		return fail(err)
	}

	out, err := os.OpenFile(args.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer out.Close()

	// Standard input closing ends the process (and cancels an Acquire
	// under way); a deadline bounds it in case the test never closes it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
		cancel()
	}()
	stopped := func() bool { return ctx.Err() != nil }
	sleep := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}

	var (
		mu    sync.Mutex // guards buf and lease
		buf   = make([]byte, 0, 8*1024)
		lease *Lease
	)
	// Notified before the first lease, so that SIGUSR1 never finds its
	// default action (the end of the process) in place.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go pauseOnSignal(ctx, usr1, clock, func() *Lease {
		mu.Lock()
		defer mu.Unlock()
		return lease
	})
	status, lastStatus := args.Status, ""
	writeStatus := func() {
		mu.Lock()
		l := lease
		mu.Unlock()
		s := "-1 0"
		if l != nil {
			if st := l.Status(); st.State == Held || st.State == Expired {
				s = fmt.Sprintf("%d %d", st.Worker, st.Renewals)
			}
		}
		if s == lastStatus || status == "" {
			return
		}
		lastStatus = s
		tmp := status + ".tmp"
		if os.WriteFile(tmp, []byte(s), 0o644) == nil {
			_ = os.Rename(tmp, status)
		}
	}
	flush := func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(buf) == 0 {
			return nil
		}
		_, err := out.Write(buf)
		buf = buf[:0]
		return err
	}
	// Flush every 5 ms, so that a kill loses few IDs. IDs not written (a
	// kill, or the few issued after the last flush at the end) were never
	// handed to anyone: the checker sees fewer IDs, never wrong ones.
	flushed := make(chan error, 1)
	go func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				writeStatus()
				if err := flush(); err != nil {
					flushed <- err
					return
				}
			case <-ctx.Done():
				flushed <- flush()
				return
			}
		}
	}()

	for !stopped() {
		l, err := pool.Acquire(ctx)
		if err != nil {
			if !errors.Is(err, ErrNoFreeWorker) && !errors.Is(err, ErrStore) && !errors.Is(err, idtype.ErrClockBehind) &&
				!stopped() {
				return fail(err)
			}
			sleep(20 * time.Millisecond)
			continue
		}
		gen, err := l.NewGenerator()
		if err != nil {
			return fail(err)
		}
		mu.Lock()
		lease = l
		mu.Unlock()
		end := time.Time{}
		if hold[1] > 0 {
			end = time.Now().Add(between(hold))
		}
		for !stopped() && (end.IsZero() || time.Now().Before(end)) {
			id, err := gen.Next()
			if err == nil {
				mu.Lock()
				buf = history.AppendID(buf, int64(id))
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
				continue
			}
			if errors.Is(err, idtype.ErrLeaseLost) {
				break
			}
			time.Sleep(2 * time.Millisecond) // expired or clock behind: wait for the lease
		}
		mu.Lock()
		lease = nil
		mu.Unlock()
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = l.Close(cctx) // a store out of reach keeps the number for a TTL
		ccancel()
		if !stopped() && pause[1] > 0 {
			sleep(between(pause))
		}
	}
	if err := <-flushed; err != nil {
		return fail(err)
	}
	return 0
}

// pauseOnSignal stops clock at every signal on sig until the lease that
// current returns then has a renewal confirmed, or current returns
// another, or ctx ends.
func pauseOnSignal(ctx context.Context, sig <-chan os.Signal, clock *pausingClock, current func() *Lease) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
		}
		l := current()
		renewals := int64(-1)
		if l != nil {
			renewals = l.Status().Renewals
		}
		clock.pause()
		tick := time.NewTicker(time.Millisecond)
		for clock.isPaused() {
			select {
			case <-ctx.Done():
				clock.resume()
			case <-tick.C:
				if now := current(); now != l || (now != nil && now.Status().Renewals > renewals) {
					clock.resume()
				}
			}
		}
		tick.Stop()
	}
}

// randDur returns a duration in [lo, hi) from rng.
func randDur(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
