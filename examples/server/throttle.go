package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// ThrottleOptions configures the rate limits of signup and login, kept in
// Redis with GCRA (github.com/go-redis/redis_rate), so that every instance
// of the server shares them, and the queue in front of the password
// hashes. Each limit is a redis_rate.Limit: Burst requests at once, then
// Rate per Period. The zero value of every field is its default.
//
// Logins count against these limits, all of them before the password is
// checked, for any email, registered or not (so a 429 tells nothing about
// who has an account):
//
//   - per client address, whatever the accounts: one address's guessing;
//   - from a device the account's owner has logged in from (one holding a
//     valid device cookie for the account, see devices.go): per device,
//     and nothing else, so that no guessing from elsewhere locks the owner
//     out of their own devices;
//   - from any other device, per account and address: the guesses at one
//     account from one address, strict, and no bar to the account's
//     owner, who logs in from another address;
//   - from any other device, per account from all addresses together: the
//     bound on a guessing attack spread over many addresses. Reaching it
//     keeps new devices out until it refills, the owner's known devices
//     not.
type ThrottleOptions struct {
	// LoginPerIP limits the logins from one client address (an IPv6
	// client's whole /64). Zero means 10 at once, then 10 a minute.
	LoginPerIP redis_rate.Limit
	// LoginPerAccountPerIP limits the logins to one email from one client
	// address. Zero means 5 at once, then 1 a minute.
	LoginPerAccountPerIP redis_rate.Limit
	// LoginPerAccount limits the logins to one email from all addresses
	// together, of devices the owner has not logged in from. Zero means 50
	// at once, then 50 an hour.
	LoginPerAccount redis_rate.Limit
	// LoginPerDevice limits the logins from one device the owner has
	// logged in from (one device cookie). Zero means 5 at once, then 1 a
	// minute.
	LoginPerDevice redis_rate.Limit
	// SignupPerIP limits the signups from one client address. Zero means
	// 10 at once, then 10 an hour.
	SignupPerIP redis_rate.Limit
	// SignupPerAccount limits the signups for one email, from any
	// address, as strictly as LoginPerAccountPerIP. Zero means 5 at once,
	// then 1 a minute.
	SignupPerAccount redis_rate.Limit
	// HashQueue is how many requests may wait for a password-hash slot
	// while every slot is busy; one more is answered 503 at once. Zero
	// means 8 per slot.
	HashQueue int
	// HashWait is the longest a request waits for a hash slot before it
	// is answered 503. Zero means 1 s.
	HashWait time.Duration
}

// defaultKeyPrefix starts the Redis keys the example writes itself.
const defaultKeyPrefix = "example:"

// A rule is one of the rate limits.
type rule int

const (
	loginIP rule = iota
	loginAccountIP
	loginAccount
	loginDevice
	signupIP
	signupAccount
	numRules
)

// name is the rule's part of its Redis keys and its metrics label.
func (r rule) name() string {
	return [...]string{"login-ip", "login-account-ip", "login-account", "login-device", "signup-ip", "signup-account"}[r]
}

// message is what a client that hit the rule is told, with the wait.
func (r rule) message(wait int) string {
	return fmt.Sprintf([...]string{
		"too many login attempts from your address; try again in %d s",
		"too many login attempts for this account from your address; try again in %d s",
		"too many login attempts for this account; try again in %d s",
		"too many login attempts from this device; try again in %d s",
		"too many signups from your address; try again in %d s",
		"too many signups for this address; try again in %d s",
	}[r], wait)
}

// throttle applies the rate limits.
type throttle struct {
	limiter *redis_rate.Limiter
	prefix  string
	limits  [numRules]redis_rate.Limit
	denied  [numRules]atomic.Uint64
	// blocked remembers, for keys Redis has just refused, until when:
	// the rest of a flood is answered from memory, with the same wait,
	// instead of a Redis round trip each (see blockList).
	blocked blockList
}

// maxBlocked bounds the keys a throttle remembers as refused.
const maxBlocked = 10000

// blockList is the keys Redis refused, each with the moment Redis said a
// request would next be allowed. Until then Redis would refuse them too
// (GCRA counts no refused request, so the moment does not move), so
// answering from memory changes no answer; it only spares Redis and the
// server the round trips of a flood. Another instance may take the token
// that frees up at that moment; the next request past it asks Redis
// again. Entries past their moment are dropped when the list is full.
type blockList struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// wait returns how long key stays refused, if it does.
func (b *blockList) wait(key string, now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.until[key]
	if !ok {
		return 0, false
	}
	if !now.Before(u) {
		delete(b.until, key)
		return 0, false
	}
	return u.Sub(now), true
}

// block remembers that key is refused until u.
func (b *blockList) block(key string, u, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until == nil {
		b.until = make(map[string]time.Time)
	}
	if len(b.until) >= maxBlocked {
		for k, v := range b.until {
			if !now.Before(v) {
				delete(b.until, k)
			}
		}
		if len(b.until) >= maxBlocked {
			return // a flood of many keys: Redis answers each
		}
	}
	b.until[key] = u
}

func newThrottle(o ThrottleOptions, prefix string) (*throttle, error) {
	if prefix == "" {
		prefix = defaultKeyPrefix
	}
	strict := redis_rate.Limit{Rate: 1, Period: time.Minute, Burst: 5}
	t := &throttle{prefix: prefix}
	for r, f := range []struct {
		name string
		set  redis_rate.Limit
		def  redis_rate.Limit
	}{
		loginIP:        {"LoginPerIP", o.LoginPerIP, redis_rate.Limit{Rate: 10, Period: time.Minute, Burst: 10}},
		loginAccountIP: {"LoginPerAccountPerIP", o.LoginPerAccountPerIP, strict},
		loginAccount:   {"LoginPerAccount", o.LoginPerAccount, redis_rate.Limit{Rate: 50, Period: time.Hour, Burst: 50}},
		loginDevice:    {"LoginPerDevice", o.LoginPerDevice, strict},
		signupIP:       {"SignupPerIP", o.SignupPerIP, redis_rate.Limit{Rate: 10, Period: time.Hour, Burst: 10}},
		signupAccount:  {"SignupPerAccount", o.SignupPerAccount, strict},
	} {
		l := f.set
		if l.IsZero() {
			l = f.def
		}
		if l.Rate <= 0 || l.Burst <= 0 || l.Period <= 0 {
			return nil, fmt.Errorf("%w: Throttle.%s %+v: want a positive Rate, Burst and Period", ErrConfig, f.name, l)
		}
		t.limits[r] = l
	}
	return t, nil
}

// bind makes the throttle keep its counts in rdb.
func (t *throttle) bind(rdb redis.UniversalClient) { t.limiter = redis_rate.NewLimiter(rdb) }

// allow counts one request against rule for key (a client address or an
// account) and returns nil if it may go on, or the 429 to answer.
func (t *throttle) allow(ctx context.Context, r rule, key string) (*apiError, error) {
	k := t.prefix + r.name() + ":" + key
	now := time.Now()
	d, blocked := t.blocked.wait(k, now)
	if !blocked {
		res, err := t.limiter.Allow(ctx, k, t.limits[r])
		if err != nil {
			return nil, fmt.Errorf("rate limit %s: %w", r.name(), err)
		}
		if res.Allowed > 0 {
			return nil, nil
		}
		d = res.RetryAfter
		t.blocked.block(k, now.Add(d), now)
	}
	t.denied[r].Add(1)
	wait := retryAfterSeconds(d)
	return &apiError{status: http.StatusTooManyRequests, msg: r.message(wait), retryAfter: wait}, nil
}

// retryAfterSeconds rounds a wait up to whole seconds, the unit of
// Retry-After, and at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// addressKey is the rate-limit key of a client address: the address
// itself for IPv4, the /64 for IPv6, since one IPv6 client usually holds
// a whole /64 and could otherwise take a fresh address for each request.
func addressKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

// accountKey is the rate-limit key of an email: a digest, so that Redis
// holds no address, and keys have a fixed length whatever was sent.
func accountKey(email string) string {
	sum := sha256.Sum256([]byte(email))
	return hex.EncodeToString(sum[:16])
}
