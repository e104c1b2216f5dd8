package routing_test

import (
	"encoding/json"
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/sinks/slack"
)

// Routes compiled against a sink type's shape (no sink built, so no
// secrets) tell which targets an event reaches and what each would be
// given: what `outboxd routes test` prints.
func ExampleTable_Route() {
	cfg, _ := routing.Parse(map[string]any{"orders": map[string]any{
		"events": []any{"order.*"},
		"to":     []any{map[string]any{"sink": "ops-slack", "template": map[string]any{"text": "Order {{.data.id}} created"}}},
	}}, "")
	table, problems := routing.CompileShapes(cfg, map[string]sink.Shape{"ops-slack": slack.Shape()})
	if len(problems) > 0 {
		fmt.Println(problems)
		return
	}
	reached, err := table.Route(sink.Event{Type: "order.created", Key: "order-42", Data: json.RawMessage(`{"id": 42}`)})
	for _, r := range reached {
		fmt.Println(r.Route, r.Sink, string(r.Payload))
	}
	none, _ := table.Route(sink.Event{Type: "invoice.paid", Key: "inv-1", Data: json.RawMessage(`{}`)})
	fmt.Println(err, len(none))
	// Output:
	// orders ops-slack {"text":"Order 42 created"}
	// <nil> 0
}
