package tokens

import (
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

// The seam of the control runs, which show that a defence is needed by
// switching it off; users cannot reach it. Each test that proves a
// defence switches that one off alone.

// newWithout is New with the defences in off switched off.
func newWithout(client redis.UniversalClient, gen idtype.Source, opts Options, off defences) (*Manager, error) {
	return newManager(client, gen, opts, off)
}

// newCookiesWithout is NewCookies with the defences in off switched off.
func newCookiesWithout(m *Manager, opts CookieOptions, off cookieDefences) (*Cookies, error) {
	return newCookies(m, opts, off)
}
