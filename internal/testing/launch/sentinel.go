package launch

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// SentinelConfig says what a Sentinel monitors.
type SentinelConfig struct {
	// Master is the name under which the Sentinel knows the master, the
	// MasterName of a go-redis FailoverClient.
	Master string
	// MasterAddr is the master's host:port.
	MasterAddr string
	// downAfter is how long the master must be unreachable before the
	// Sentinel deems it down and fails over to a replica; default 5s.
	downAfter time.Duration
}

// StartSentinel starts a redis-server in Sentinel mode, as cfg says (its
// Args are more options), that monitors one master with a quorum of 1, so
// that it alone may fail over; it returns once the Sentinel answers PING.
// Its configuration file, which Sentinel rewrites as it learns, is
// sentinel.conf in cfg.Dir.
func StartSentinel(ctx context.Context, cfg RedisConfig, s SentinelConfig) (*Redis, error) {
	if cfg.name == "" {
		cfg.name = "redis sentinel"
	}
	host, port, err := net.SplitHostPort(s.MasterAddr)
	if err != nil {
		return nil, fmt.Errorf("%s: master address %q: %w", cfg.name, s.MasterAddr, err)
	}
	if s.downAfter <= 0 {
		s.downAfter = 5 * time.Second
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.name, err)
	}
	// Sentinel takes the monitored master from its file, which must
	// exist and be writable; the port and the rest come from the command
	// line, so that a retry on another port needs no new file.
	conf := filepath.Join(cfg.Dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s %d\n",
		s.Master, host, port, s.Master, s.downAfter.Milliseconds())
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.name, err)
	}
	return startRedis(ctx, cfg, func(port int) []string {
		return append(append([]string{conf, "--sentinel"}, serverArgs(port, cfg.Dir)...), cfg.Args...)
	})
}
