package main

// The test seams of the defences of accounts and sessions: each switches
// one defence off in a Config, for the control run that must see the
// violation that defence prevents. Nothing outside the tests reaches them.

// withoutVerification makes sign-ups usable at once, with no mail.
func (c *Config) withoutVerification() { c.noVerification = true }

// withoutDeviceCookies recognizes no login as coming from the owner's
// known device.
func (c *Config) withoutDeviceCookies() { c.noDeviceCookies = true }

// keepingOtherSessions leaves the user's other sessions alive after a
// password change.
func (c *Config) keepingOtherSessions() { c.keepOtherSessions = true }

// withTokenInBody sends the token in the body of a cookie login too.
func (c *Config) withTokenInBody() { c.tokenInBody = true }

// withOpenEmbeddedRedis starts the embedded Redis without a password.
func (c *Config) withOpenEmbeddedRedis() { c.openEmbeddedRedis = true }
