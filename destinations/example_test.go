package destinations_test

import (
	"fmt"
	"strings"

	"github.com/outboxd/outboxd/destinations"
)

// A keyring seals a destination's signing secret under its first key and
// opens it with any key it holds; the secret is bound to its destination.
func ExampleKeyring() {
	newKey, _ := destinations.NewKey("k2")
	keys, err := destinations.ParseKeyring(newKey + "," + testKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	keyID, sealed, _ := keys.Seal("dst_a", []byte("whsec_..."))
	plain, _ := keys.Open(keyID, "dst_a", sealed)
	_, err = keys.Open(keyID, "dst_b", sealed)
	fmt.Println(keyID, string(plain))
	fmt.Println(err)
	fmt.Println(keys)
	// Output:
	// k2 whsec_...
	// destination dst_b: its secret does not open with key k2 (another key, or altered)
	// keyring[k2,k1]
}

// NewKey makes a key in OUTBOXD_SECRETS_KEY's form.
func ExampleNewKey() {
	k, _ := destinations.NewKey("k1")
	id, key, _ := strings.Cut(k, ":")
	fmt.Println(id, len(key))
	// Output: k1 44
}

// Derive gives another feature a key of its own from each sealing key:
// every process holding the same OUTBOXD_SECRETS_KEY derives the same
// one, and each purpose gets a different one.
func ExampleKeyring_Derive() {
	keys, _ := destinations.ParseKeyring(testKey)
	links, _ := keys.Derive("outboxd tenant portal links")
	again, _ := keys.Derive("outboxd tenant portal links")
	other, _ := keys.Derive("another purpose")
	fmt.Println(len(links["k1"]), string(links["k1"]) == string(again["k1"]), string(links["k1"]) == string(other["k1"]))
	// Output: 32 true false
}
