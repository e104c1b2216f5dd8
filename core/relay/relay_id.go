package relay

import (
	"crypto/rand"
	"fmt"
	"os"
)

// ID names the relay in the database (the lead it may hold, its wake-up
// registrations): host name, process id and a random suffix, unique per
// Relay.
func (r *Relay) ID() string { return r.id }

func newRelayID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:8])
}
