package secrets_test

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core"
)

// TestHostileSchemaNamesRefused: the schema name is the one piece of
// configuration that reaches SQL text; core.New refuses anything but a
// plain lower-case identifier, and the error quotes it safely.
func TestHostileSchemaNamesRefused(t *testing.T) {
	t.Parallel()
	hostile := []string{
		`outbox; DROP TABLE users; --`, `outbox"; DROP SCHEMA public CASCADE; --`,
		`a.b`, `"quoted"`, `Outbox`, `1outbox`, `out box`, `out-box`, `outbox$1`,
		`pg_catalog" --`, "outbox\x00", "outbox\n", `ünïcode`, strings.Repeat("a", 64),
		`outbox' OR '1'='1`, `$$`, `*`, `outbox/*`,
	}
	for _, name := range hostile {
		if ob, err := core.New(name); err == nil {
			t.Errorf("core.New(%q) accepted it as schema %q", name, ob.Schema())
		}
	}
	for _, name := range []string{"outbox", "_x", "tenant_42", strings.Repeat("a", 63)} {
		if _, err := core.New(name); err != nil {
			t.Errorf("core.New(%q): %v", name, err)
		}
	}
}
