package console

import "time"

// SessionValue is a session cookie's value signed by c, valid until
// expiry: for tests that need a genuine session the clock has passed.
func SessionValue(c *Console, expiry time.Time) string { return c.auth.newSession(expiry) }
