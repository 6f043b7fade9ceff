package main

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// describeRedis says, for the first log line, which Redis cfg uses.
func describeRedis(cfg Config) string {
	switch {
	case cfg.Redis != nil:
		return "the given client"
	case cfg.RedisURL != "":
		if u, err := url.Parse(cfg.RedisURL); err == nil {
			return u.Redacted()
		}
		return "REDIS_URL"
	default:
		return "in-process miniredis (sessions end with the process; set REDIS_URL for a real Redis)"
	}
}

// openRedis returns the Redis client the sessions live in: cfg.Redis, a
// client of cfg.RedisURL, or one of an in-process miniredis.
func (a *App) openRedis(ctx context.Context, cfg Config) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	switch {
	case cfg.Redis != nil:
		rdb = cfg.Redis
	case cfg.RedisURL != "":
		opts, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("%w: REDIS_URL: %w", ErrConfig, err)
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
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
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
type embeddedRedis struct {
	*miniredis.Miniredis
	stop chan struct{}
	done sync.WaitGroup
}

func startMiniredis() (*embeddedRedis, error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, err
	}
	e := &embeddedRedis{Miniredis: m, stop: make(chan struct{})}
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
