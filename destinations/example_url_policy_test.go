package destinations_test

import (
	"context"
	"fmt"

	"github.com/outboxd/outboxd/destinations"
)

// The network policy checks a destination's URL at the door: an address
// it refuses, written so or resolved to, and a port it does not allow are
// refused naming url; a public address passes (its deliveries are checked
// again when they connect).
func ExampleNetwork_CheckDestinationURL() {
	n, err := destinations.NetworkConfig{Schemes: []string{"https"}, Ports: []int{443}}.Network()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, raw := range []string{"https://127.0.0.1/hook", "https://203.0.113.10:8443/hook", "https://203.0.113.10/hook"} {
		fmt.Println(n.CheckDestinationURL(context.Background(), raw))
	}
	// Output:
	// url: its host is, or resolves to, an address the network policy refuses (loopback, private, link-local or denied)
	// url: its url's port 8443 is not allowed by the network policy
	// <nil>
}
