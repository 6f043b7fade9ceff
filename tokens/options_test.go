package tokens

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestOptionsDefaults(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	m, err := New(redis.NewClient(&redis.Options{}), newGen(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := m.Options()
	if o.KeyPrefix != DefaultKeyPrefix || o.TokenPrefix != DefaultTokenPrefix ||
		o.IdleTimeout != DefaultIdleTimeout || o.AbsoluteLifetime != DefaultAbsoluteLifetime ||
		o.RefreshInterval != DefaultIdleTimeout/2 || o.MaxSessions != DefaultMaxSessions ||
		o.CacheTTL != 0 || o.CacheSize != DefaultCacheSize || o.WaitReplicas != 0 ||
		o.WaitTimeout != DefaultWaitTimeout || o.RotationGrace != DefaultRotationGrace {
		t.Errorf("defaults: %+v", o)
	}
	if m.cache != nil {
		t.Error("a cache without CacheTTL")
	}
	m, err = New(redis.NewClient(&redis.Options{}), newGen(t), Options{CacheTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if m.cache == nil {
		t.Error("no cache with CacheTTL")
	}
}

func TestOptionsInvalid(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	tests := []struct {
		name  string
		opts  Options
		field string
	}{
		{"brace in KeyPrefix", Options{KeyPrefix: "app{1}:"}, "KeyPrefix"},
		{"underscore in TokenPrefix", Options{TokenPrefix: "my_app"}, "TokenPrefix"},
		{"long TokenPrefix", Options{TokenPrefix: strings.Repeat("a", 17)}, "TokenPrefix"},
		{"non-ASCII TokenPrefix", Options{TokenPrefix: "é"}, "TokenPrefix"},
		{"negative IdleTimeout", Options{IdleTimeout: -1}, "IdleTimeout"},
		{"negative AbsoluteLifetime", Options{AbsoluteLifetime: -time.Hour}, "AbsoluteLifetime"},
		{"AbsoluteLifetime past the maximum", Options{AbsoluteLifetime: MaxAbsoluteLifetime + time.Hour}, "AbsoluteLifetime"},
		{"RefreshInterval = IdleTimeout", Options{IdleTimeout: time.Hour, RefreshInterval: time.Hour}, "RefreshInterval"},
		{"RefreshInterval below 10 ms", Options{RefreshInterval: time.Millisecond}, "RefreshInterval"},
		{"negative MaxSessions", Options{MaxSessions: -1}, "MaxSessions"},
		{"negative CacheTTL", Options{CacheTTL: -1}, "CacheTTL"},
		{"CacheTTL outlasting the idle window", Options{IdleTimeout: time.Minute, CacheTTL: 31 * time.Second}, "CacheTTL"},
		{"negative CacheSize", Options{CacheSize: -5}, "CacheSize"},
		{"negative WaitReplicas", Options{WaitReplicas: -1}, "WaitReplicas"},
		{"WaitTimeout below 1 ms", Options{WaitReplicas: 1, WaitTimeout: time.Microsecond}, "WaitTimeout"},
		{"negative RotationGrace", Options{RotationGrace: -time.Second}, "RotationGrace"},
		{"RotationGrace below 1 ms", Options{RotationGrace: time.Microsecond}, "RotationGrace"},
		{"RotationGrace past the maximum", Options{RotationGrace: MaxRotationGrace + time.Second}, "RotationGrace"},
	}
	for _, tt := range tests {
		_, err := New(redis.NewClient(&redis.Options{}), newGen(t), tt.opts)
		if !errors.Is(err, idtype.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: New = %v, want idtype.ErrInvalidOptions naming %s", tt.name, err, tt.field)
		}
	}
	short := redis.NewClient(&redis.Options{ReadTimeout: time.Second})
	if _, err := New(short, newGen(t), Options{WaitReplicas: 1, WaitTimeout: time.Second}); !errors.Is(err, idtype.ErrInvalidOptions) ||
		!strings.Contains(err.Error(), "WaitTimeout") {
		t.Errorf("WaitTimeout equal to the client's ReadTimeout: %v, want idtype.ErrInvalidOptions naming WaitTimeout", err)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	if _, err := New(ring, newGen(t), Options{WaitReplicas: 1}); !errors.Is(err, idtype.ErrInvalidOptions) ||
		!strings.Contains(err.Error(), "WaitReplicas") {
		t.Errorf("WaitReplicas with a Ring: %v, want idtype.ErrInvalidOptions naming WaitReplicas", err)
	}
	if m, err := New(redis.NewClient(&redis.Options{}), newGen(t), Options{WaitReplicas: 2}); err != nil ||
		m.Options().WaitTimeout != DefaultWaitTimeout {
		t.Errorf("WaitReplicas 2 with the default WaitTimeout: %v, %v", err, m.Options().WaitTimeout)
	}
	if _, err := New(nil, newGen(t), Options{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("nil client: %v", err)
	}
	if _, err := New(redis.NewClient(&redis.Options{}), nil, Options{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("nil generator: %v", err)
	}
}
