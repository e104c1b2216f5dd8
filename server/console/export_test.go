package console

import "time"

// SessionValue is a session cookie's value of the token called name,
// signed by c, valid until expiry: for tests that need a genuine session
// the clock has passed.
func SessionValue(c *Console, name string, expiry time.Time) string {
	t, ok := c.auth.access.Named(name)
	if !ok {
		panic("console: no token " + name)
	}
	return newSession(t, expiry)
}
