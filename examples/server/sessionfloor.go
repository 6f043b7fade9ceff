package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

// A fixed worker's session IDs live in Redis, not in a table, and outlive
// the process when Redis is a real one. A restarted server must start
// after them as it starts after the newest row, or a clock set back would
// make it issue a session ID it already issued. Redis can tell no newest
// session cheaply (the tokens package keeps them under keys of its own),
// so the server keeps a floor of its own beside them, the way a worker
// lease keeps its high-water mark: one key per worker number,
//
//	<KeyPrefix>session-floor:<worker>   Unix ms, no expiry
//
// that lies at or above the time of every session ID the worker issued.
// Before each Issue the server makes sure the floor is at least
// sessionFloorMargin ahead of its clock, raising it to sessionFloorAhead
// ahead when it is not: one write every few seconds under steady logins,
// none when idle. Close lowers it to the newest session ID issued, so that
// a restart after a clean stop waits for nothing; after a crash the next
// start waits for the clock to pass it, sessionFloorAhead at most.

const (
	sessionFloorAhead  = 10 * time.Second
	sessionFloorMargin = 5 * time.Second
)

// sessionFloor is the Redis record that every session ID of one fixed
// worker lies at or below. It is safe for concurrent use.
type sessionFloor struct {
	rdb   redis.UniversalClient
	key   string
	clock idtype.Clock
	until atomic.Int64 // ms: the floor as this process last wrote or read it
	// newest is the ms of the newest session ID issued here, or of the
	// floor the process started with.
	newest atomic.Int64
	wrote  atomic.Bool
}

func newSessionFloor(rdb redis.UniversalClient, prefix string, worker int64, clock idtype.Clock) *sessionFloor {
	return &sessionFloor{rdb: rdb, key: prefix + "session-floor:" + strconv.FormatInt(worker, 10), clock: clock}
}

// load reads the floor; the zero time if the worker never issued a
// session here.
func (f *sessionFloor) load(ctx context.Context) (time.Time, error) {
	v, err := f.rdb.Get(ctx, f.key).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read the session floor: %w", err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return time.Time{}, fmt.Errorf("the session floor %s holds %q, not Unix milliseconds", f.key, v)
	}
	f.until.Store(ms)
	f.newest.Store(ms)
	return time.UnixMilli(ms), nil
}

// raiseScript sets the floor to ARGV[1] unless it is higher already, and
// returns the floor.
var raiseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or tonumber(cur) < tonumber(ARGV[1]) then
	redis.call('SET', KEYS[1], ARGV[1])
	return ARGV[1]
end
return cur`)

// lowerScript sets the floor to ARGV[2] if it still holds ARGV[1], what
// this process last wrote.
var lowerScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('SET', KEYS[1], ARGV[2])
	return 1
end
return 0`)

// cover makes sure the next session ID, issued right after it returns,
// lies below the floor.
func (f *sessionFloor) cover(ctx context.Context) error {
	now := f.clock.UnixNano() / int64(time.Millisecond)
	if now+sessionFloorMargin.Milliseconds() <= f.until.Load() {
		return nil
	}
	v, err := raiseScript.Run(ctx, f.rdb, []string{f.key}, now+sessionFloorAhead.Milliseconds()).Text()
	if err != nil {
		return fmt.Errorf("raise the session floor: %w", err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("the session floor %s holds %q, not Unix milliseconds", f.key, v)
	}
	f.wrote.Store(true)
	for {
		cur := f.until.Load()
		if ms <= cur || f.until.CompareAndSwap(cur, ms) {
			return nil
		}
	}
}

// issued records a session ID issued under the floor.
func (f *sessionFloor) issued(t time.Time) {
	ms := t.UnixMilli()
	for {
		cur := f.newest.Load()
		if ms <= cur || f.newest.CompareAndSwap(cur, ms) {
			return
		}
	}
}

// close lowers the floor to the newest session ID issued, unless another
// process with the same worker number (a misconfiguration) wrote it since.
func (f *sessionFloor) close(ctx context.Context) error {
	if !f.wrote.Load() {
		return nil
	}
	err := lowerScript.Run(ctx, f.rdb, []string{f.key}, f.until.Load(), f.newest.Load()).Err()
	if err != nil {
		return fmt.Errorf("lower the session floor: %w", err)
	}
	return nil
}
