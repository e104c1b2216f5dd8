package config

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
)

// The catalog of event types comes from event_types, in order, with
// outboxd's operational events after it; an example that does not
// validate against its schema, a schema that is not one, a missing
// example and a name declared twice are each a problem at their key; the
// effective configuration shows the catalog.
// (Mutations: eventType skipping the validation of the example loads the
// file with the invalid example; checkEventTypes not marking names seen
// loads invoice.paid twice.)
func TestEventTypesCatalog(t *testing.T) {
	t.Parallel()
	catalog := `event_types:
  - name: invoice.paid
    description: An invoice was paid in full.
    example: {invoice: inv_1, amount: 1200, currency: EUR}
    schema:
      type: object
      required: [invoice, amount]
      properties:
        amount: {type: number, minimum: 0}
  - name: order.shipped
    example: {order: ord_9}
`
	loaded, err := loadFile(t, catalog, DatabaseOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := loaded.Config.EventTypes()
	ops := destinations.OperationalEventTypes()
	if len(got) != 2+len(ops) || got[0].Name != "invoice.paid" || got[1].Name != "order.shipped" || got[2].Name != ops[0].Name {
		t.Fatalf("catalog %+v", got)
	}
	var example map[string]any
	if err := json.Unmarshal(got[0].Example, &example); err != nil || example["amount"] != 1200.0 || len(got[0].Schema) == 0 || len(got[1].Schema) != 0 {
		t.Errorf("invoice.paid %s schema %s, order.shipped schema %s", got[0].Example, got[0].Schema, got[1].Schema)
	}
	var shown bytes.Buffer
	if err := loaded.Config.WriteRedacted(&shown); err != nil || !strings.Contains(shown.String(), "invoice.paid") || !strings.Contains(shown.String(), "currency: EUR") {
		t.Errorf("config show: %v\n%s", err, shown.String())
	}
	for name, tc := range map[string]struct{ file, key string }{
		"example against its schema": {strings.Replace(catalog, "amount: 1200", "amount: -5", 1), "event_types[0].example"},
		"a schema that is not one":   {strings.Replace(catalog, "type: number", "type: 12", 1), "event_types[0].schema"},
		"no example":                 {strings.Replace(catalog, "    example: {order: ord_9}\n", "", 1), "event_types[1].example"},
		"a name twice":               {strings.Replace(catalog, "order.shipped", "invoice.paid", 1), "event_types[1].name"},
		"an operational name":        {strings.Replace(catalog, "order.shipped", destinations.EventFailing, 1), "event_types[1].name"},
		"a wildcard":                 {strings.Replace(catalog, "order.shipped", "order.*", 1), "event_types[1].name"},
	} {
		if _, err := loadFile(t, tc.file, DatabaseOnly, nil); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want a problem at %s", name, err, tc.key)
		}
	}
}
