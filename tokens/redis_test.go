package tokens

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
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
	s := k.session(tag, 1863486340915077120)
	u := k.index(tag, 1863480000000000001)
	if want := "tok:{" + tg + "}s1863486340915077120"; s != want {
		t.Errorf("session key %q, want %q", s, want)
	}
	if want := "tok:{" + tg + "}u" + fmt.Sprintf("%016x", 1863480000000000001); u != want {
		t.Errorf("index key %q, want %q", u, want)
	}
	if p := k.sessionPrefix(tag); !strings.HasPrefix(s, p) || len(s)-len(p) != 19 {
		t.Errorf("session prefix %q of %q", p, s)
	}
	if id := k.sessionID(s); id != "1863486340915077120" {
		t.Errorf("session ID of %q is %q", s, id)
	}
	// Redis keeps keys of up to 30 bytes in its smallest allocation for
	// them; the default prefix must leave keys within it.
	if max := len(DefaultKeyPrefix) + 24; len(s) > max || len(u) > max || max > 30 {
		t.Errorf("keys %q and %q: longer than the default prefix + 24 = %d, or that is past 30", s, u, max)
	}
}

// TestSameSlot checks on the real cluster that a user's keys and the
// keys built from a token land in one slot.
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
		want := slot(k.index(tag, user))
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
		m := newManager(t, c, gen, Options{KeyPrefix: prefix})
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
				case "set":
					dump = append(dump, node.SMembers(ctx, key).Val()...)
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

// TestIndexKeyInLua checks that the index key the scripts build from a
// record's user bytes is the one Go builds from the user ID, for IDs
// whose bytes hit every edge of the two 32-bit halves.
func TestIndexKeyInLua(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, []backend{miniBackend, singleBackend}, func(t *testing.T, b backend) {
		c := b.client(t)
		k := keys{prefix: "tok:"}
		script := redis.NewScript("local v = ARGV[1]\n" + luaIndexKey + "\nreturn idx")
		for _, user := range []idtype.ID{1, 255, 256, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1863480000000000001, 0x7f80ff00ff00ff80} {
			tag := slotTag(user)
			const sid = idtype.ID(1863486340915077120)
			rec := (&record{user: user}).encode()
			got, err := script.Run(t.Context(), c, []string{k.session(tag, sid)}, rec, sid.String()).Text()
			if err != nil {
				t.Fatal(err)
			}
			if want := k.index(tag, user); got != want {
				t.Errorf("user %d: Lua builds %q, Go %q", user, got, want)
			}
		}
	})
}
