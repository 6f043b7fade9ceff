package faultproxy

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
)

// matchBytes returns a request matcher for Proxy.DropReplies that matches
// requests containing sub anywhere.
func matchBytes(sub string) func(request []byte) bool {
	b := []byte(sub)
	return func(req []byte) bool { return bytes.Contains(req, b) }
}

// MatchPGQuery returns a request matcher for Proxy.DropReplies that matches
// PostgreSQL requests whose bytes contain sql, such as a distinctive part
// of one statement's text.
//
// pgx sends a statement's text only when it prepares it: with its default
// statement cache, the first execution on a connection carries the text
// (in a Parse message) and later ones only the name of the prepared
// statement. A test that matches SQL text should connect with
// default_query_exec_mode=exec (or simple_protocol) in the DSN, so that
// every execution carries the text; or match something else the request
// always holds.
//
// Inside an explicit transaction, the statement's effects last only if
// the transaction commits: a dropped reply to a statement before COMMIT
// closes the connection, and PostgreSQL rolls the transaction back. To
// lose the reply of a transaction that did commit, match its COMMIT, or
// run the statement on its own (autocommit).
func MatchPGQuery(sql string) func(request []byte) bool {
	return matchBytes(sql)
}

// MatchRedisScript returns a request matcher for Proxy.DropReplies that
// matches a Redis request running the Lua script src: EVALSHA or
// EVALSHA_RO with the script's SHA-1, which is what go-redis's
// Script.Run sends first, or EVAL or EVAL_RO with the script's text, which
// it sends when the server answers NOSCRIPT.
func MatchRedisScript(src string) func(request []byte) bool {
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	return func(req []byte) bool {
		for _, cmd := range redisCommands(req) {
			if len(cmd) < 2 {
				continue
			}
			switch strings.ToUpper(cmd[0]) {
			case "EVALSHA", "EVALSHA_RO":
				if strings.EqualFold(cmd[1], sha) {
					return true
				}
			case "EVAL", "EVAL_RO":
				if cmd[1] == src {
					return true
				}
			}
		}
		return false
	}
}

// matchRedisCommand returns a request matcher for Proxy.DropReplies that
// matches a Redis request holding the command name (any case) whose first
// arguments are args, for example MatchRedisCommand("DEL", key).
func matchRedisCommand(name string, args ...string) func(request []byte) bool {
	return func(req []byte) bool {
	cmds:
		for _, cmd := range redisCommands(req) {
			if len(cmd) < 1+len(args) || !strings.EqualFold(cmd[0], name) {
				continue
			}
			for i, a := range args {
				if cmd[1+i] != a {
					continue cmds
				}
			}
			return true
		}
		return false
	}
}

// redisCommands parses the complete RESP arrays of bulk strings at the
// start of b, the way clients send commands; it stops at the first
// incomplete or malformed one.
func redisCommands(b []byte) [][]string {
	var cmds [][]string
	for len(b) > 0 {
		n, rest, ok := respHeader(b, '*')
		if !ok || n < 1 {
			return cmds
		}
		cmd := make([]string, 0, min(n, 16))
		for range n {
			size, after, ok := respHeader(rest, '$')
			if !ok || size < 0 || len(after) < size+2 || after[size] != '\r' || after[size+1] != '\n' {
				return cmds
			}
			cmd = append(cmd, string(after[:size]))
			rest = after[size+2:]
		}
		cmds = append(cmds, cmd)
		b = rest
	}
	return cmds
}

// respHeader parses "<kind><n>\r\n" at the start of b.
func respHeader(b []byte, kind byte) (n int, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != kind {
		return 0, nil, false
	}
	end := bytes.Index(b, []byte("\r\n"))
	if end < 0 || end > 21 {
		return 0, nil, false
	}
	n, err := strconv.Atoi(string(b[1:end]))
	if err != nil || n < -1 || n > maxRequestBuf {
		return 0, nil, false
	}
	return n, b[end+2:], true
}
