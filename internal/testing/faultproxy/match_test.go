package faultproxy

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// resp encodes a command as a client sends it.
func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func TestMatchRedisScript(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	const src = "return redis.call('INCR', KEYS[1])"
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	match := MatchRedisScript(src)
	tests := []struct {
		name string
		req  string
		want bool
	}{
		{"evalsha", resp("evalsha", sha, "1", "k"), true},
		{"EVALSHA upper-case sha", resp("EVALSHA", strings.ToUpper(sha), "1", "k"), true},
		{"evalsha_ro", resp("evalsha_ro", sha, "0"), true},
		{"eval with the text", resp("eval", src, "1", "k"), true},
		{"in a pipeline", resp("get", "a") + resp("evalsha", sha, "0"), true},
		{"another script", resp("evalsha", strings.Repeat("0", 40), "0"), false},
		{"sha as a plain argument", resp("set", sha, "1"), false},
		{"incomplete", resp("evalsha", sha, "1", "k")[:30], false},
		{"empty", "", false},
		{"inline command", "EVALSHA " + sha + " 0\r\n", false},
	}
	for _, tt := range tests {
		if got := match([]byte(tt.req)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMatchRedisCommand(t *testing.T) {
	tests := []struct {
		match func([]byte) bool
		req   string
		want  bool
	}{
		{matchRedisCommand("DEL", "k1"), resp("del", "k1"), true},
		{matchRedisCommand("DEL", "k1"), resp("del", "k2"), false},
		{matchRedisCommand("DEL"), resp("del", "k2", "k3"), true},
		{matchRedisCommand("DEL", "k1", "k2"), resp("del", "k1"), false},
		{matchRedisCommand("SET"), resp("get", "k") + resp("set", "k", "v"), true},
		{matchRedisCommand("SET"), resp("getset", "k", "v"), false},
	}
	for _, tt := range tests {
		if got := tt.match([]byte(tt.req)); got != tt.want {
			t.Errorf("%q: %v, want %v", tt.req, got, tt.want)
		}
	}
}

func TestRedisCommandsMalformed(t *testing.T) {
	for _, in := range []string{
		"*", "*\r\n", "*-5\r\n", "*2\r\n$-1\r\n", "*1\r\n$99999999999999999999999\r\n",
		"*1\r\n$3\r\nab", "*1\r\n$3\r\nabcXY", "$3\r\nabc\r\n", "*2\r\n$1\r\na\r\n",
	} {
		if cmds := redisCommands([]byte(in)); len(cmds) != 0 {
			t.Errorf("%q parsed as %q", in, cmds)
		}
	}
	if cmds := redisCommands([]byte(resp("a", "") + "*1")); len(cmds) != 1 || cmds[0][1] != "" {
		t.Errorf("complete command then a partial one: %q", cmds)
	}
}

func FuzzRedisCommands(f *testing.F) {
	f.Add([]byte(resp("evalsha", "abc", "1", "k")))
	f.Add([]byte("*1\r\n$3\r\nab"))
	f.Add([]byte("*-1\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, cmd := range redisCommands(b) {
			for _, arg := range cmd {
				if len(arg) > len(b) {
					t.Fatalf("argument longer than the input")
				}
			}
		}
		_ = MatchRedisScript("x")(b)
	})
}

func TestMatchPGQuery(t *testing.T) {
	// A Parse message: 'P', length, statement name, query text, parameter types.
	parse := "P\x00\x00\x00\x2a\x00UPDATE worker_leases SET token = $1\x00\x00\x00"
	if !MatchPGQuery("UPDATE worker_leases")([]byte(parse)) {
		t.Error("Parse message with the text not matched")
	}
	if MatchPGQuery("DELETE")([]byte(parse)) {
		t.Error("other text matched")
	}
}
