package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2Params are the cost settings of argon2id password hashes. They are
// stored in each hash, so they can be raised later without breaking old
// hashes.
type Argon2Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes
	Threads uint8
}

// DefaultArgon2 returns OWASP's minimum recommendation for argon2id
// (Password Storage Cheat Sheet): 19 MiB, 2 passes, 1 thread.
func DefaultArgon2() Argon2Params { return Argon2Params{Memory: 19 * 1024, Time: 2, Threads: 1} }

const (
	saltLen = 16
	keyLen  = 32
)

// errBadHash means a stored hash is not one hashPassword wrote: the
// database holds something else than expected.
var errBadHash = errors.New("stored password hash is malformed")

// hashPassword returns password's argon2id hash in the PHC string format
// ($argon2id$v=19$m=…,t=…,p=…$salt$key), which carries its own salt and
// parameters.
func hashPassword(password string, p Argon2Params) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// checkPassword reports whether password matches hash, comparing in
// constant time. An error means the hash itself is unusable.
func checkPassword(password, hash string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var p Argon2Params
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil ||
		p.Memory == 0 || p.Time == 0 || p.Threads == 0 {
		return false, errBadHash
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
