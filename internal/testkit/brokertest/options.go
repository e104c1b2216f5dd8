package brokertest

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
)

// BadOptions is one refused configuration of a sink: its options and what
// the error must say.
type BadOptions struct {
	Name    string
	Options map[string]any
	Want    string // the error must contain it
}

// CheckBadOptions builds a sink of type typ from each case's options and
// requires an error that contains the case's text and never repeats
// secret.
func CheckBadOptions(t *testing.T, typ, secret string, cases []BadOptions) {
	t.Helper()
	for _, c := range cases {
		_, err := registry.Build(typ, "events", c.Options, sink.Env{})
		if err == nil {
			t.Errorf("%s: built, want an error", c.Name)
			continue
		}
		if !strings.Contains(err.Error(), c.Want) {
			t.Errorf("%s: error %q, want it to contain %q", c.Name, err, c.Want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %q repeats a secret", c.Name, err)
		}
	}
}
