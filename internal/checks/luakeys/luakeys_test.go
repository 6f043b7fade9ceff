package luakeys

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// undeclaredIn returns, for every script Find reads under dir, each key
// it does not receive in KEYS ("file script COMMAND key"), and the files
// where Find read scripts.
func undeclaredIn(t *testing.T, dir string) (found, files []string) {
	t.Helper()
	scripts, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		files = append(files, s.File)
		for _, u := range undeclared(s.Source) {
			found = append(found, fmt.Sprintf("%s %s %s %s", s.File, s.Name, u.Command, u.Key))
		}
	}
	slices.Sort(found)
	return found, slices.Compact(slices.Sorted(slices.Values(files)))
}

// TestRepositoryScripts: every Redis script of the repository receives in
// KEYS each key it touches.
func TestRepositoryScripts(t *testing.T) {
	found, files := undeclaredIn(t, "../../..")
	for _, want := range []string{"workerid/redis.go", "tokens/redis.go"} {
		if !slices.Contains(files, want) {
			t.Errorf("no script found in %s: the test reads nothing there", want)
		}
	}
	t.Logf("scripts in %d files", len(files))
	for _, f := range found {
		t.Errorf("%s: a key the script does not receive in KEYS", f)
	}
}

// TestRepositoryScriptsControl runs TestRepositoryScripts's check over
// scripts that build their keys (testdata/undeclared): it must report
// each of them, or the repository's test would pass whatever the scripts
// do.
func TestRepositoryScriptsControl(t *testing.T) {
	found, files := undeclaredIn(t, "testdata/undeclared")
	want := []string{
		"scripts.go line 13 DEL k",
		"scripts.go validate GET ARGV[1] .. sid",
	}
	if !slices.Equal(found, want) || len(files) != 1 {
		t.Errorf("undeclared keys %q in %q, want %q", found, files, want)
	}
}

func TestUndeclared(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string // "line COMMAND key"
	}{
		{"declared", `local v = redis.call('GET', KEYS[1])
redis.call("HSET", KEYS[2], ARGV[1], v)
redis.call('DEL', KEYS[1], KEYS[3])`, nil},
		{"built", `redis.call('GET', ARGV[1] .. 'x')`, []string{"1 GET ARGV[1] .. 'x'"}},
		{"every key of DEL", `redis.call('DEL', KEYS[1], 'other')`, []string{"1 DEL 'other'"}},
		{"no key", `local t = redis.call('TIME')`, nil},
		{"pcall", `redis.pcall('SREM', idx, ARGV[2])`, []string{"1 SREM idx"}},
		{"variable from KEYS", `for i = 2, #ARGV do
  local w, key = ARGV[i], KEYS[i - 1]
  local k2 = key
  redis.call('GET', k2)
end`, nil},
		{"variable from elsewhere", `local key = KEYS[1]
if ARGV[1] ~= '' then
  key = ARGV[1] .. 'x'
end
redis.call('GET', key)`, []string{"5 GET key"}},
		{"control run line", `local key = KEYS[1]
if ARGV[1] ~= '' then
  key = ARGV[1] .. 'x' ` + controlMark + `
end
redis.call('GET', key)`, nil},
		{"loop variable", `for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('DEL', sid)
end`, []string{"2 DEL sid"}},
		{"comment", `redis.call('GET', KEYS[1]) -- not redis.call('GET', x)`, nil},
		{"string with dashes", `redis.call('SET', KEYS[1], '--', 'PX', ARGV[1])`, nil},
		{"unknown command", `redis.call(ARGV[1], KEYS[1])`, []string{"1 ? ARGV[1]"}},
		{"never assigned", `redis.call('GET', k)`, []string{"1 GET k"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, u := range undeclared(tt.src) {
				got = append(got, fmt.Sprintf("%d %s %s", u.Line, u.Command, u.Key))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Undeclared = %q, want %q\n%s", got, tt.want, tt.src)
			}
		})
	}
}

func TestFindConstants(t *testing.T) {
	scripts, err := Find("testdata/constants")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range scripts {
		names = append(names, s.Name+"="+strings.Join(strings.Fields(s.Source), " "))
	}
	slices.Sort(names)
	want := []string{
		"joined=local x = 1 redis.call('GET', KEYS[1])",
		"line 12=redis.call('DEL', KEYS[1])",
	}
	if !slices.Equal(names, want) {
		t.Errorf("Find = %q, want %q", names, want)
	}
}
