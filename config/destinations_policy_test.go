package config

import (
	"strings"
	"testing"
)

// Commands that need only the database check a destination's URL under
// the policy serve delivers under: a DatabaseOnly load builds the sinks
// delivering to destinations (for their deprecated network aliases) but
// not the others, whose unset ${VAR}s still do not matter, and
// DestinationNetwork is the policy those sinks hold, else
// destinations.network, else the default.
// (Mutation: keptOptions keeping only the one sink asked for, as before:
// the DatabaseOnly policy refuses the loopback URL the aliases allow.)
func TestDestinationNetworkUnderDatabaseOnlyIsServes(t *testing.T) {
	t.Parallel()
	const loopback = "http://127.0.0.1:8080/hook"
	check := func(t *testing.T, text string, wantRefused bool) {
		t.Helper()
		for _, scope := range []Scope{DatabaseOnly, Everything} {
			env := map[string]string{"SLACK_BOT_TOKEN": "xoxb-1"}
			if scope == DatabaseOnly {
				env = nil // not needed: the slack sink is not built
			}
			loaded, err := loadFile(t, text, scope, env)
			if err != nil {
				t.Fatalf("scope %v: %v", scope, err)
			}
			err = loaded.Config.DestinationNetwork().CheckDestinationURL(t.Context(), loopback)
			if refused := err != nil && strings.HasPrefix(err.Error(), "url: "); refused != wantRefused {
				t.Errorf("scope %v: the loopback URL checked with %v, want refused %t", scope, err, wantRefused)
			}
		}
	}
	const slack = "  ops:\n    type: slack\n    options: {token: \"${SLACK_BOT_TOKEN}\", channel: \"#ops\"}\n"
	check(t, "sinks:\n  customers: {type: destinations, options: {allow_private: true}}\n"+slack, false)
	check(t, "sinks:\n  customers: {type: destinations}\n"+slack, true)
	check(t, "destinations:\n  network: {allow: [127.0.0.0/8]}\nsinks:\n  customers: {type: destinations}\n"+slack, false)
	check(t, "destinations:\n  network: {allow: [127.0.0.0/8]}\nsinks:\n"+slack, false)
}
