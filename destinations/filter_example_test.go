package destinations_test

import (
	"encoding/json"
	"fmt"

	"github.com/outboxd/outboxd/destinations"
)

// CheckFilter takes a payload filter as a tenant writes it and returns it
// compacted for storing (its keys in order), or an error naming the path
// of what it refuses.
func ExampleCheckFilter() {
	stored, err := destinations.CheckFilter(json.RawMessage(`{
		"type": "invoice.paid",
		"data.amount": {"$gt": 1000},
		"data.currency": {"$in": ["EUR", "CHF"]}
	}`))
	fmt.Println(string(stored), err)

	_, err = destinations.CheckFilter(json.RawMessage(`{"$and": [{"type": "invoice.paid"}, {"data.amount": {"$gt": true}}]}`))
	fmt.Println(err)
	// Output:
	// {"data.amount":{"$gt":1000},"data.currency":{"$in":["EUR","CHF"]},"type":"invoice.paid"} <nil>
	// filter.$and[1].data.amount.$gt: must be a number or a string, got a boolean
}
