package tokens

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestRecordRoundTrip(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	tests := []struct {
		name     string
		r        record
		size     int
		wantMeta Metadata
	}{
		{"bare", record{user: 1, lastSeen: 0}, headLen, Metadata{}},
		{"max values", record{user: idtype.MaxID, lastSeen: 1<<32 - 1, login: 1<<62 + 5}, headLen + 10, Metadata{}},
		{"metadata", record{user: 9, lastSeen: 77, meta: Metadata{Device: "phone", UserAgent: "UA/1", IP: "::1"}},
			headLen + 7 + 6 + 5, Metadata{Device: "phone", UserAgent: "UA/1", IP: "::1"}},
		{"long metadata is cut", record{user: 9, meta: Metadata{UserAgent: long}},
			headLen + 2 + 254, Metadata{UserAgent: long[:254]}},
	}
	for _, tt := range tests {
		for i := range tt.r.digest {
			tt.r.digest[i] = byte(i * 7)
		}
		b := tt.r.encode()
		if len(b) != tt.size {
			t.Errorf("%s: %d bytes, want %d", tt.name, len(b), tt.size)
		}
		got, err := decodeRecord(string(b), true)
		if err != nil {
			t.Errorf("%s: decode: %v", tt.name, err)
			continue
		}
		want := tt.r
		want.meta = tt.wantMeta
		if got != want {
			t.Errorf("%s: decode = %+v\nwant %+v", tt.name, got, want)
		}
		noDigest, err := decodeRecord(string(b[digestLen:]), false)
		want.digest = [digestLen]byte{}
		if err != nil || noDigest != want {
			t.Errorf("%s: decode without digest = %+v, %v", tt.name, noDigest, err)
		}
	}
}

func TestDecodeRecordCorrupt(t *testing.T) {
	good := (&record{user: 5, meta: Metadata{Device: "d"}}).encode()
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short head", good[:headLen-1]},
		{"user zero", make([]byte, headLen)},
		{"field without length", append(good[:headLen:headLen], fieldDevice)},
		{"field past the end", append(good[:headLen:headLen], fieldDevice, 9, 'x')},
		{"login of 7 bytes", append(good[:headLen:headLen], fieldLogin, 7, 1, 2, 3, 4, 5, 6, 7)},
	}
	for _, tt := range tests {
		if r, err := decodeRecord(string(tt.b), true); err == nil {
			t.Errorf("%s: decode = %+v, want an error", tt.name, r)
		}
	}
	withUnknown := append(good[:len(good):len(good)], 99, 2, 'h', 'i')
	if r, err := decodeRecord(string(withUnknown), true); err != nil || r.meta.Device != "d" {
		t.Errorf("unknown field: %+v, %v; want it skipped", r, err)
	}
}

func TestKeys(t *testing.T) {
	k := keys{prefix: "tok:"}
	tag := slotTag(1863480000000000001)
	tg := string(appendBase62(nil, uint64(tag), tagDigits))
	const sid = idtype.ID(1863486340915077120)
	s := k.session(tag, sid)
	i := k.index(tag)
	if want := "tok:{" + tg + "}s" + string(appendBase62(nil, uint64(sid), sidDigits)); s != want {
		t.Errorf("session key %q, want %q", s, want)
	}
	if want := "tok:{" + tg + "}i"; i != want {
		t.Errorf("index key %q, want %q", i, want)
	}
	if s2, i2 := k.sessionAndIndex(tag, sid); s2 != s || i2 != i {
		t.Errorf("sessionAndIndex = %q, %q; want %q, %q", s2, i2, s, i)
	}
	// Redis keeps a key of up to 22 bytes in a 24-byte allocation (its
	// 1-byte header and a terminating zero besides) where its allocator
	// has that size: a session key is the prefix and 16 bytes, and the
	// default prefix must leave it within that.
	if max := len(DefaultKeyPrefix) + 16; len(s) != max || max > 22 {
		t.Errorf("session key %q: not the prefix and 16 bytes, or past 22 bytes with the default prefix", s)
	}
	if got := parseEntries(entryID(sid) + "\x00\x00\x00\x01" + entryID(7) + "\xff\xff\xff\xff" + "junk"); len(got) != 2 || got[0] != sid || got[1] != 7 {
		t.Errorf("parseEntries = %v", got)
	}
}

// TestSameSlot checks on the real cluster that the keys of a user's
// sessions, those built from their tokens and the index of their tag land
// in one slot.
func TestSameSlot(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	c := testenv.RedisClusterClient(t)
	ctx := t.Context()
	k := keys{prefix: testenv.KeyPrefix(t)}
	slot := func(key string) int64 {
		n, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	seen := map[int64]bool{}
	for user := idtype.ID(1863480000000000001); user < 1863480000000000001+50; user++ {
		tag := slotTag(user)
		want := slot(k.index(tag))
		seen[want] = true
		tok := token{session: 1863486340915077120 + user%7, tag: tag}
		parsed, _ := parseToken("snk", tok.format("snk"))
		if got := slot(k.session(parsed.tag, parsed.session)); got != want {
			t.Errorf("user %d: session key in slot %d, index in %d", user, got, want)
		}
	}
	if len(seen) < 30 {
		t.Errorf("50 users share %d slots: tags do not spread", len(seen))
	}
}

// TestNoSecretInRedis issues sessions and reads back every key and value
// the Manager wrote: none may hold a secret or a token, in any encoding.
func TestNoSecretInRedis(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, []backend{miniBackend, singleBackend, clusterBackend}, func(t *testing.T, b backend) {
		ctx := t.Context()
		c := b.client(t)
		gen := newGen(t)
		prefix := testenv.KeyPrefix(t)
		m := openManager(t, c, gen, Options{KeyPrefix: prefix})
		var toks []string
		for range 3 {
			user := userID(t, gen)
			for range 3 {
				tok, _ := issue(t, m, user, Metadata{Device: "d", UserAgent: "ua", IP: "127.0.0.1"})
				toks = append(toks, tok)
			}
		}
		rotated, _, err := m.Rotate(ctx, toks[0])
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, rotated)

		var dump []string
		scan := func(ctx context.Context, node redis.UniversalClient) error {
			iter := node.Scan(ctx, 0, prefix+"*", 100).Iterator()
			for iter.Next(ctx) {
				key := iter.Val()
				dump = append(dump, key)
				switch typ := node.Type(ctx, key).Val(); typ {
				case "string":
					dump = append(dump, node.Get(ctx, key).Val())
				case "hash":
					for f, v := range node.HGetAll(ctx, key).Val() {
						dump = append(dump, f, v)
					}
				default:
					t.Errorf("key %q has type %q", key, typ)
				}
			}
			return iter.Err()
		}
		if cc, ok := c.(*redis.ClusterClient); ok {
			var mu = make(chan struct{}, 1)
			err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
				mu <- struct{}{}
				defer func() { <-mu }()
				return scan(ctx, node)
			})
		} else {
			err = scan(ctx, c)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(dump) < 20 {
			t.Fatalf("found only %d keys and values", len(dump))
		}
		for _, tok := range toks {
			p, _ := parseToken("snk", tok)
			secretText := tok[len("snk_")+sidDigits+tagDigits : len(tok)-sumDigits]
			for _, d := range dump {
				for _, secret := range []string{string(p.secret[:]), secretText, secretText[:11], string(p.secret[:8])} {
					if strings.Contains(d, secret) {
						t.Errorf("Redis holds (part of) a secret: %q", d)
					}
				}
			}
		}
	})
}

// TestIndexEntries checks the index entries that the scripts write:
// Issue, Rotate and the refresh each write the session's entry with an
// expiry past its key's, by Redis's clock, so that dropping an entry
// whose expiry has passed never drops a live session; Revoke drops it.
func TestIndexEntries(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, []backend{miniBackend, singleBackend, clusterBackend}, func(t *testing.T, b backend) {
		ctx := t.Context()
		c := b.client(t)
		gen := newGen(t)
		m := openManager(t, c, gen, Options{IdleTimeout: time.Hour, RefreshInterval: 20 * time.Millisecond})
		user := userID(t, gen)
		tag := slotTag(user)
		check := func(what string, sids ...idtype.ID) {
			t.Helper()
			v, err := c.HGet(ctx, m.keys.index(tag), userField(user)).Result()
			if err != nil {
				t.Fatalf("%s: HGET of the user's field: %v", what, err)
			}
			if got := parseEntries(v); !slices.Equal(got, sids) || len(v) != len(sids)*entryLen {
				t.Fatalf("%s: entries %v (%d bytes), want %v", what, got, len(v), sids)
			}
			for i, sid := range sids {
				pttl, err := c.PTTL(ctx, m.keys.session(tag, sid)).Result()
				if err != nil || pttl <= 0 {
					t.Fatalf("%s: PTTL of session %d = %v, %v", what, sid, pttl, err)
				}
				now := time.Now() // no earlier than Redis's TIME in the script
				expiry := time.Unix(int64(binary.BigEndian.Uint32([]byte(v[i*entryLen+8:]))), 0)
				if key := now.Add(pttl); !expiry.After(key.Add(-time.Second)) || expiry.After(now.Add(time.Hour+2*time.Second)) {
					t.Errorf("%s: session %d: entry expiry %v, key expiry about %v", what, sid, expiry, key)
				}
			}
		}
		tok1, s1 := issue(t, m, user, Metadata{})
		_, s2 := issue(t, m, user, Metadata{})
		check("after two Issues", s1.ID, s2.ID)
		time.Sleep(30 * time.Millisecond)
		if _, err := m.Validate(ctx, tok1); err != nil { // refreshes
			t.Fatal(err)
		}
		check("after a refresh", s1.ID, s2.ID)
		tok3, s3, err := m.Rotate(ctx, tok1)
		if err != nil {
			t.Fatal(err)
		}
		check("after Rotate", s2.ID, s3.ID)
		if err := m.Revoke(ctx, tok3); err != nil {
			t.Fatal(err)
		}
		check("after Revoke", s2.ID)
		if ok, err := m.RevokeSession(ctx, user, s2.ID); !ok || err != nil {
			t.Fatalf("RevokeSession = %v, %v", ok, err)
		}
		if n, err := c.HExists(ctx, m.keys.index(tag), userField(user)).Result(); n || err != nil {
			t.Errorf("the field of a user without sessions: HEXISTS = %v, %v; want it deleted", n, err)
		}
	})
}

// loseIndex deletes a user's field of the index, as a lost write leaves
// it.
func loseIndex(t testing.TB, c redis.UniversalClient, m *Manager, user idtype.ID) {
	t.Helper()
	if err := c.HDel(context.Background(), m.keys.index(slotTag(user)), userField(user)).Err(); err != nil {
		t.Fatal(err)
	}
}

// inIndex reports whether a session has its entry in its user's field of
// the index.
func inIndex(t testing.TB, c redis.UniversalClient, m *Manager, user, sid idtype.ID) bool {
	t.Helper()
	v, err := c.HGet(context.Background(), m.keys.index(slotTag(user)), userField(user)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return slices.Contains(parseEntries(v), sid)
}
