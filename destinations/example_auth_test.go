package destinations_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/destinations"
)

// A PATCH body's authentication, as the API decodes it: a header set to
// a string is set, to null removed; oauth2 null removes the client
// credentials; a part the body leaves out (here the certificate) is kept.
func ExampleAuthPatch() {
	var p destinations.Patch
	body := `{"headers": {"X-Api-Key": "a new key", "X-Team": null}, "oauth2": null}`
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		fmt.Println(err)
		return
	}
	team, named := p.Headers["X-Team"]
	fmt.Println("X-Api-Key set:", p.Headers["X-Api-Key"] != nil)
	fmt.Println("X-Team removed:", named && team == nil)
	fmt.Println("oauth2 removed:", p.OAuth2.Set && p.OAuth2.Value == nil)
	fmt.Println("certificate kept:", !p.TLSClientCert.Set)
	// Output:
	// X-Api-Key set: true
	// X-Team removed: true
	// oauth2 removed: true
	// certificate kept: true
}

// The clients a destinations sink delivers through, under the default
// network policy: the policy's own for destinations without
// authentication (Clients.For gives each other destination its own,
// built once per revision).
func ExampleNetwork_Clients() {
	network, err := destinations.DefaultNetworkConfig().Network()
	if err != nil {
		fmt.Println(err)
		return
	}
	clients := network.Clients(10*time.Second, nil)
	fmt.Println(clients.Shared().Timeout)
	// Output: 10s
}
