package tracing_test

import (
	"fmt"
	"strings"

	"github.com/outboxd/outboxd/test/tracing"
)

// A trace as Jaeger's /api/traces/{id} returns it: the delivery span is a
// child of the producer's span, and the webhook's HTTP call a child of the
// delivery.
func ExampleDecodeTraces() {
	body := `{"data": [{"traceID": "t1", "spans": [
		{"traceID": "t1", "spanID": "a", "operationName": "POST /orders", "references": []},
		{"traceID": "t1", "spanID": "b", "operationName": "send hooks",
		 "references": [{"refType": "CHILD_OF", "traceID": "t1", "spanID": "a"}],
		 "tags": [{"key": "outbox.attempt", "type": "int64", "value": 2},
		          {"key": "outbox.outcome", "type": "string", "value": "sent"}]},
		{"traceID": "t1", "spanID": "c", "operationName": "HTTP POST",
		 "references": [{"refType": "CHILD_OF", "traceID": "t1", "spanID": "b"}]}]}]}`
	traces, err := tracing.DecodeTraces(strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	tr := traces[0]
	for _, send := range tr.Named("send hooks") {
		fmt.Println(send.OperationName, "attempt", send.Tag("outbox.attempt"), send.Tag("outbox.outcome"), "under", send.Parent())
		for _, c := range tr.Children(send) {
			fmt.Println("  ", c.OperationName)
		}
	}
	// Output:
	// send hooks attempt 2 sent under a
	//    HTTP POST
}
