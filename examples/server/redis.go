package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// describeRedis says, for the first log line, which Redis cfg uses. A
// REDIS_URL is read by go-redis's own parser, which the client will use
// too, and described from the fields it read: never the password.
func describeRedis(cfg Config) (string, error) {
	switch {
	case cfg.Redis != nil:
		return "the given client", nil
	case cfg.RedisURL != "":
		o, err := parseRedisURL(cfg.RedisURL)
		if err != nil {
			return "", err
		}
		user := ""
		if o.Username != "" {
			user = o.Username + "@"
		}
		return fmt.Sprintf("%s %s%s db %d", o.Network, user, o.Addr, o.DB), nil
	default:
		return "in-process miniredis on loopback, behind a password made at start (sessions end with the process; set REDIS_URL for a real Redis)", nil
	}
}

// parseRedisURL reads a REDIS_URL with go-redis's parser.
func parseRedisURL(s string) (*redis.Options, error) {
	o, err := redis.ParseURL(s)
	if err != nil {
		return nil, fmt.Errorf("%w: REDIS_URL: %s", ErrConfig, parseErrorText(s, err))
	}
	return o, nil
}

// openRedis returns the Redis client the sessions live in: cfg.Redis, a
// client of cfg.RedisURL, or one of an in-process miniredis.
func (a *App) openRedis(ctx context.Context, cfg Config) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	switch {
	case cfg.Redis != nil:
		rdb = cfg.Redis
	case cfg.RedisURL != "":
		opts, err := parseRedisURL(cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		c := redis.NewClient(opts)
		a.onClose(closeFunc(c))
		rdb = c
	default:
		m, err := startMiniredis()
		if err != nil {
			return nil, fmt.Errorf("start the in-process Redis: %w", err)
		}
		a.onClose(m.close)
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), Password: m.password})
		a.onClose(closeFunc(c))
		rdb = c
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return rdb, nil
}

// embeddedRedis is a miniredis whose TTLs run on the wall clock.
// miniredis never expires keys by itself (tests move its time with
// FastForward), so a goroutine does that once a second; without it the
// sessions' idle timeout would never strike.
//
// It listens on a loopback TCP port, which every process of the machine
// can reach: one that could talk to it could write a session for any
// user ID, or reset the rate limits. So it answers nothing before AUTH
// with a password of 256 random bits made at start, which only this
// process knows.
type embeddedRedis struct {
	*miniredis.Miniredis
	password string
	stop     chan struct{}
	done     sync.WaitGroup
}

// startMiniredis starts the embedded Redis, behind a fresh password.
func startMiniredis() (*embeddedRedis, error) {
	m := miniredis.NewMiniRedis()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // never fails; it crashes the program instead
	pw := hex.EncodeToString(secret)
	m.RequireAuth(pw)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	e := &embeddedRedis{Miniredis: m, password: pw, stop: make(chan struct{})}
	e.done.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-e.stop:
				return
			case now := <-t.C:
				e.FastForward(now.Sub(last))
				last = now
			}
		}
	})
	return e, nil
}

func (e *embeddedRedis) close(context.Context) error {
	close(e.stop)
	e.done.Wait()
	e.Close()
	return nil
}
