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
	"time"

	"github.com/redis/go-redis/v9"
)

// Device cookies keep strangers from locking an owner out of their
// account (OWASP's "Slow Down Online Guessing Attacks with Device
// Cookies"). Every successful login sets a cookie on the client that
// names the account (by a digest of its email), a random device number
// and the time, signed by the server. A later login to that account that
// brings a valid one counts against the limit of that device alone;
// every other login counts against the limits of the account, which a
// guessing attack from many addresses can exhaust. So the attack keeps
// out new devices, its own included, while the owner goes on logging in
// from the devices they used before.
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

// A device cookie's value, before base64: account digest, device number,
// issue time (Unix seconds), HMAC-SHA256 of the three.
const (
	deviceAccountLen = 16
	deviceNumberLen  = 16
	deviceTimeLen    = 8
	deviceMACLen     = sha256.Size
	deviceValueLen   = deviceAccountLen + deviceNumberLen + deviceTimeLen + deviceMACLen
)

// devices issues and recognizes device cookies.
type devices struct {
	key []byte
	off bool // recognize none: the test-only control
}

// newDevices loads the signing key from Redis, making it if no instance
// has yet.
func newDevices(ctx context.Context, rdb redis.UniversalClient, prefix string, off bool) (*devices, error) {
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
	return &devices{key: key, off: off}, nil
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

// issue sets a device cookie for the account of email on w: the answer
// to a successful login.
func (d *devices) issue(w http.ResponseWriter, email string) {
	v := make([]byte, 0, deviceValueLen)
	acct := accountDigest(email)
	v = append(v, acct[:]...)
	v = append(v, rand.Text()[:deviceNumberLen]...)
	v = binary.BigEndian.AppendUint64(v, uint64(time.Now().Unix()))
	v = append(v, d.mac(v)...)
	http.SetCookie(w, &http.Cookie{
		Name:     deviceCookieName,
		Value:    base64.RawURLEncoding.EncodeToString(v),
		Path:     "/",
		MaxAge:   int(deviceLifetime.Seconds()),
		Secure:   true,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
}

// errNoDevice means the request brings no valid device cookie for the
// account: none, another account's, a forged, altered or expired one.
var errNoDevice = errors.New("no device cookie of this account")

// recognize returns the device number of the request's device cookie if
// it is valid for the account of email.
func (d *devices) recognize(r *http.Request, email string) (string, error) {
	if d.off {
		return "", errNoDevice
	}
	ck, err := r.Cookie(deviceCookieName)
	if err != nil {
		return "", errNoDevice
	}
	v, err := base64.RawURLEncoding.Strict().DecodeString(ck.Value)
	if err != nil || len(v) != deviceValueLen {
		return "", errNoDevice
	}
	body, mac := v[:deviceValueLen-deviceMACLen], v[deviceValueLen-deviceMACLen:]
	if !hmac.Equal(mac, d.mac(body)) {
		return "", errNoDevice
	}
	acct := accountDigest(email)
	if !hmac.Equal(body[:deviceAccountLen], acct[:]) {
		return "", errNoDevice
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(body[deviceAccountLen+deviceNumberLen:])), 0)
	if age := time.Since(issued); age > deviceLifetime || age < -time.Minute {
		return "", errNoDevice
	}
	return string(body[deviceAccountLen : deviceAccountLen+deviceNumberLen]), nil
}
