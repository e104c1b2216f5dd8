package destinations_test

import (
	"fmt"

	"github.com/outboxd/outboxd/destinations"
)

// The catalog a tenant's portal offers: the operator's event types, then
// outboxd's operational events about the tenant's own endpoints, which a
// destination takes by subscribing to outboxd.destination.*.
func ExampleCatalog_Lookup() {
	catalog := append(destinations.Catalog{{Name: "invoice.paid", Description: "An invoice was paid in full.",
		Example: []byte(`{"invoice": "inv_1", "amount": 1200}`)}}, destinations.OperationalEventTypes()...)
	for _, t := range catalog {
		fmt.Println(t.Name, t.Operational)
	}
	paid, ok := catalog.Lookup("invoice.paid")
	fmt.Println(ok, string(paid.Example))
	_, ok = catalog.Lookup("invoice.lost")
	fmt.Println(ok)
	// Output:
	// invoice.paid false
	// outboxd.destination.failing true
	// outboxd.destination.recovered true
	// outboxd.destination.disabled true
	// true {"invoice": "inv_1", "amount": 1200}
	// false
}
