package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Device cookies keep strangers from locking an owner out of their
// account (OWASP's "Slow Down Online Guessing Attacks with Device
// Cookies"). Every successful login sets a cookie on the client that
// names the account (by a digest of its email), a device number, the
// account's credential epoch and the time, signed by the server. A later
// login to that account that brings a valid one counts against the limit
// of that device alone, and its password check has a hash slot no flood
// can take (see hashpool.go); every other login counts against the
// limits of the account, which a guessing attack from many addresses can
// exhaust. So the attack keeps out new devices, its own included, while
// the owner goes on logging in from the devices they used before.
//
// Whoever holds the password can earn device cookies, each with a limit
// of its own. So a cookie is valid only while
//
//   - the account's credential epoch is the one it names: a password
//     change raises the epoch (see changePassword), and every cookie
//     earned with the old password, one earned by a login in flight
//     during the change included (it names the epoch its password was
//     checked against), counts as no device from then on;
//   - its device number is one of the last maxDevices the account's
//     logins of that epoch brought or were given, kept in Redis
//     (<KeyPrefix>devices:<account digest>:<epoch>, a sorted set scored
//     by the time of each device's last login, in microseconds): a login that brings a
//     valid cookie keeps its number, a login without one gets a new
//     number, which pushes out the number unused the longest.
//
// So the guesses the device limits let through, at any time, are at most
// maxDevices times one device's limit, and none once the password has
// changed.
//
// The signing key lives in Redis (<KeyPrefix>device-key), made by the
// first instance that needs it, so that every instance and restart
// recognizes the same cookies. Whoever can write that key can sign
// cookies, which lets them past the account limit, onto a device limit:
// nothing that lets them log in.

// deviceCookieName is the device cookie's name: __Host-, so that no page
// on another host or over plain HTTP can set it.
const deviceCookieName = "__Host-device"

// deviceLifetime is how long a device cookie is recognized.
const deviceLifetime = 180 * 24 * time.Hour

// maxDevices is the most device numbers an account has at once.
const maxDevices = 10

// A device cookie's value, before base64: account digest, device number,
// credential epoch, issue time (Unix seconds), HMAC-SHA256 of the four.
const (
	deviceAccountLen = 16
	deviceNumberLen  = 16
	deviceEpochLen   = 8
	deviceTimeLen    = 8
	deviceMACLen     = sha256.Size
	deviceBodyLen    = deviceAccountLen + deviceNumberLen + deviceEpochLen + deviceTimeLen
	deviceValueLen   = deviceBodyLen + deviceMACLen
)

// devices issues and recognizes device cookies.
type devices struct {
	key    []byte
	rdb    redis.UniversalClient
	prefix string
	d      defences // devicesAnyEpoch
}

// newDevices loads the signing key from Redis, making it if no instance
// has yet.
func newDevices(ctx context.Context, rdb redis.UniversalClient, prefix string, d defences) (*devices, error) {
	k := prefix + "device-key"
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh)
	if err := rdb.SetNX(ctx, k, hex.EncodeToString(fresh), 0).Err(); err != nil {
		return nil, fmt.Errorf("device cookie key: %w", err)
	}
	v, err := rdb.Get(ctx, k).Result()
	if err != nil {
		return nil, fmt.Errorf("device cookie key: %w", err)
	}
	key, err := hex.DecodeString(v)
	if err != nil || len(key) < 32 {
		return nil, fmt.Errorf("device cookie key: %s does not hold 32 hex-encoded bytes", k)
	}
	return &devices{key: key, rdb: rdb, prefix: prefix, d: d}, nil
}

// accountDigest names an account in a device cookie without its email.
func accountDigest(email string) [deviceAccountLen]byte {
	sum := sha256.Sum256([]byte("device:" + email))
	return [deviceAccountLen]byte(sum[:deviceAccountLen])
}

func (d *devices) mac(body []byte) []byte {
	m := hmac.New(sha256.New, d.key)
	m.Write(body)
	return m.Sum(nil)
}

// registry is the Redis key of the device numbers of the account of
// email in credential epoch epoch.
func (d *devices) registry(email string, epoch int64) string {
	return d.prefix + "devices:" + accountKey(email) + ":" + strconv.FormatInt(epoch, 10)
}

// A deviceCookie is what a valid device cookie says.
type deviceCookie struct {
	number string
	epoch  int64
	issued time.Time
}

// sign returns the value of a device cookie for the account of email.
func (d *devices) sign(email string, c deviceCookie) string {
	v := make([]byte, 0, deviceValueLen)
	acct := accountDigest(email)
	v = append(v, acct[:]...)
	v = append(v, c.number...)
	v = binary.BigEndian.AppendUint64(v, uint64(c.epoch))
	v = binary.BigEndian.AppendUint64(v, uint64(c.issued.Unix()))
	v = append(v, d.mac(v)...)
	return base64.RawURLEncoding.EncodeToString(v)
}

// errNoDevice means the request brings no valid device cookie for the
// account: none, another account's, a forged, altered or expired one,
// one of an earlier credential epoch, or one whose number the account
// no longer has.
var errNoDevice = errors.New("no device cookie of this account")

// parse reads a device cookie's value: what it says, if the server
// signed it for the account of email and it has not expired. It does no
// I/O.
func (d *devices) parse(value, email string, now time.Time) (deviceCookie, error) {
	v, err := base64.RawURLEncoding.Strict().DecodeString(value)
	if err != nil || len(v) != deviceValueLen {
		return deviceCookie{}, errNoDevice
	}
	body, mac := v[:deviceBodyLen], v[deviceBodyLen:]
	if !hmac.Equal(mac, d.mac(body)) {
		return deviceCookie{}, errNoDevice
	}
	acct := accountDigest(email)
	if !hmac.Equal(body[:deviceAccountLen], acct[:]) {
		return deviceCookie{}, errNoDevice
	}
	rest := body[deviceAccountLen:]
	c := deviceCookie{
		number: string(rest[:deviceNumberLen]),
		epoch:  int64(binary.BigEndian.Uint64(rest[deviceNumberLen:])),
		issued: time.Unix(int64(binary.BigEndian.Uint64(rest[deviceNumberLen+deviceEpochLen:])), 0),
	}
	if age := now.Sub(c.issued); age > deviceLifetime || age < -time.Minute {
		return deviceCookie{}, errNoDevice
	}
	return c, nil
}

// signed reports whether the request brings a device cookie that the
// server signed for the account of email and that has not expired: one
// that recognize may accept, once it has checked the epoch and the
// registry. It does no I/O.
func (d *devices) signed(r *http.Request, email string) bool {
	ck, err := r.Cookie(deviceCookieName)
	if err != nil {
		return false
	}
	_, err = d.parse(ck.Value, email, time.Now())
	return err == nil
}

// recognize returns the device number of the request's device cookie if
// it is valid for the account of email in credential epoch epoch, and
// errNoDevice if it is not. Another error means Redis could not say.
func (d *devices) recognize(ctx context.Context, r *http.Request, email string, epoch int64) (string, error) {
	ck, err := r.Cookie(deviceCookieName)
	if err != nil {
		return "", errNoDevice
	}
	c, err := d.parse(ck.Value, email, time.Now())
	if err != nil {
		return "", err
	}
	if c.epoch != epoch && !d.d.devicesAnyEpoch {
		return "", errNoDevice
	}
	err = d.rdb.ZScore(ctx, d.registry(email, c.epoch), c.number).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return "", errNoDevice
	case err != nil:
		return "", fmt.Errorf("device registry: %w", err)
	}
	return c.number, nil
}

// issue sets a device cookie for the account of email in credential
// epoch epoch on h, the headers of the answer to a successful login,
// and returns its number: known, the number of the device cookie the
// login brought (valid), or a new one. The number goes into the
// account's registry, which keeps the maxDevices used last.
func (d *devices) issue(ctx context.Context, h http.Header, email string, epoch int64, known string) (string, error) {
	number := known
	if number == "" {
		number = rand.Text()[:deviceNumberLen]
	}
	now := time.Now()
	k := d.registry(email, epoch)
	_, err := d.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, k, redis.Z{Score: float64(now.UnixMicro()), Member: number})
		p.ZRemRangeByRank(ctx, k, 0, -maxDevices-1)
		p.Expire(ctx, k, deviceLifetime)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("device registry: %w", err)
	}
	c := &http.Cookie{
		Name:     deviceCookieName,
		Value:    d.sign(email, deviceCookie{number: number, epoch: epoch, issued: now}),
		Path:     "/",
		MaxAge:   int(deviceLifetime.Seconds()),
		Secure:   true,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	}
	h.Add("Set-Cookie", c.String())
	return number, nil
}
