package outboxd_test

import (
	"log/slog"
	"testing"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/destinations"
)

// An Outbox made without a pool produces and operates through the handles
// its calls are given, and refuses what would have to connect by itself.
func TestOutboxWithoutAPoolMakesNoRelayAndNoDirectory(t *testing.T) {
	ob, err := outboxd.New(nil, outboxd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.NewRelay(relay.Config{}); err == nil {
		t.Error("NewRelay without a pool: no error")
	}
	if _, err := ob.Directory(&destinations.Keyring{}, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("Directory without a pool: no error")
	}
}

// Every part the front door hands out works on its schema.
func TestOutboxPartsShareItsSchema(t *testing.T) {
	ob, err := outboxd.New(nil, outboxd.Options{Schema: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	for part, schema := range map[string]string{"outbox": ob.Schema(), "operator": ob.Operator().Schema(), "migrator": ob.Migrator().Schema()} {
		if schema != "billing" {
			t.Errorf("the %s's schema is %q, want billing", part, schema)
		}
	}
}
