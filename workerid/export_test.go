package workerid

import (
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// The switches of the control runs, which show that a defence is needed
// by turning it off; users cannot reach them.

// redisWithout is Redis with the defences in off switched off.
func redisWithout(client redis.UniversalClient, opts Options, off defences) (*Pool, error) {
	return newRedis(client, opts, off)
}

// postgresWithout is Postgres with the defences in off switched off.
func postgresWithout(db *sql.DB, opts Options, off defences) (*Pool, error) {
	return newPostgres(db, opts, off)
}

// The defences have names, for the chaos table and for helper processes,
// which receive the defences of their pool as the names of those
// switched off. The names are derived from the fields of defences, so
// that the table never falls out of step with them: field noSendTime is
// "send-time".

// defenceName is the name of the defences field called field.
func defenceName(field string) string {
	var b strings.Builder
	for i, r := range strings.TrimPrefix(field, "no") {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// names returns the names of the defences d switches off, in the order
// of the fields.
func (d defences) names() []string {
	v := reflect.ValueOf(d)
	var out []string
	for i := range v.NumField() {
		if v.Field(i).Bool() {
			out = append(out, defenceName(v.Type().Field(i).Name))
		}
	}
	return out
}

// defencesNamed returns the defences that switch off the defences named;
// a name that is no defence is an error.
func defencesNamed(names []string) (defences, error) {
	var d defences
	v := reflect.ValueOf(&d).Elem()
	for _, name := range names {
		found := false
		for i := range v.NumField() {
			if defenceName(v.Type().Field(i).Name) == name {
				// The fields are unexported, which reflect reads but does
				// not set: set it through its address.
				f := v.Field(i)
				*(*bool)(unsafe.Pointer(f.UnsafeAddr())) = true
				found = true
			}
		}
		if !found {
			return defences{}, fmt.Errorf("no defence %q", name)
		}
	}
	return d, nil
}
