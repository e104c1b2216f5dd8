package cmd

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// hostileText is what a tenant or a receiver may store to take over an
// operator's terminal: an ESC sequence that recolours and one that sets
// the window title, a CR that overwrites the line, a right-to-left
// override, a C1 CSI and a line separator.
const hostileText = "ok\x1b[31mRED\x1b]0;pwned\x07\rFAKE\u202eevil\u009b2J\u2028end"

// terminalActs reports the first character of out a terminal would act on
// instead of showing: a control other than the newline and the tab the
// tables use, a bidirectional control, a line or paragraph separator.
func terminalActs(out string) (rune, bool) {
	for _, r := range out {
		if (r != '\n' && r != '\t' && unicode.IsControl(r)) || unicode.Is(unicode.Bidi_Control, r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			return r, true
		}
	}
	return 0, false
}

// TestTenantTextIsEscapedInEveryOutput: a destination's description and
// disable reason set by its tenant (through the destinations store, as
// the portal sets them), and a receiver's error stored on a dead letter,
// reach the operator's terminal escaped in every command's table, wide
// and text output, byte by byte; -o json stays JSON that decodes to the
// stored text exactly.
// (Mutation: writeDestinationRows printing the description and the
// reason as stored, as it did, fails this test; so does writeJSON
// writing encoding/json's output unchanged (the bidi override and C1
// pass raw).)
func TestTenantTextIsEscapedInEveryOutput(t *testing.T) {
	c := newDestCLI(t)
	st := c.ob.Destinations(c.keys)
	tenant := audit.Actor{Name: "acme", Role: "tenant", Source: "portal"}
	created, err := st.Create(t.Context(), c.pool, tenant, "acme", destinations.Spec{URL: "https://hooks.acme.example/in", Description: hostileText})
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	if _, err := st.SetEnabled(t.Context(), c.pool, tenant, "acme", id, false, hostileText); err != nil {
		t.Fatal(err)
	}
	dead := testdb.DeadRows(t, c.pool, c.ob, "partner", hostileText)

	for _, args := range [][]string{
		{"destinations", "list", "--tenant", "acme"},
		{"destinations", "list", "--tenant", "acme", "-o", "wide"},
		{"destinations", "get", id, "--tenant", "acme"},
		{"destinations", "get", id, "--tenant", "acme", "-o", "wide"},
		{"audit", "list", "-o", "wide"},
		{"dlq", "list", "--sink", "partner", "-o", "wide"},
		{"get", fmt.Sprint(dead[0])},
		{"messages", "list", "--sink", "partner"},
		{"destinations", "list", "--tenant", "acme", "-o", "json"},
		{"destinations", "get", id, "--tenant", "acme", "-o", "json"},
		{"audit", "list", "-o", "json"},
		{"dlq", "list", "--sink", "partner", "-o", "json"},
	} {
		stdout, stderr, code := c.run(false, "", args...)
		if code != exitOK {
			t.Errorf("outboxd %s: exit %d, %s", strings.Join(args, " "), code, stderr)
			continue
		}
		if r, acts := terminalActs(stdout + stderr); acts {
			t.Errorf("outboxd %s prints %U raw:\n%q", strings.Join(args, " "), r, stdout)
		}
		if !strings.Contains(stdout, "evil") {
			t.Errorf("outboxd %s does not show the stored text at all:\n%s", strings.Join(args, " "), stdout)
		}
	}

	var got destinations.Destination
	c.json(&got, "destinations", "get", id, "--tenant", "acme")
	if got.Description != hostileText || got.DisabledReason != hostileText {
		t.Errorf("-o json does not decode to the stored text: description %q, reason %q", got.Description, got.DisabledReason)
	}
	var raw map[string]any
	if out := c.json(&raw, "destinations", "get", id, "--tenant", "acme"); !json.Valid([]byte(out)) {
		t.Errorf("-o json is not JSON: %s", out)
	}
}
