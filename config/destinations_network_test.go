package config

import (
	"strings"
	"testing"
)

// The destinations' network policy is declared once: sinks of type
// destinations with differing allow_private combine into the strictest,
// with a warning saying so; aliases beside destinations.network, and a
// network the block cannot parse, are problems at their keys.
// (Mutations: Strictest combining allow_private with || fails the
// warning's "allow_private: false"; applyDestinationNetwork not refusing
// aliases beside the block loads the second file.)
func TestDestinationNetworkIsDeclaredOnce(t *testing.T) {
	t.Parallel()
	loaded, err := loadFile(t, "sinks:\n  a-internal: {type: destinations, options: {allow_private: true}}\n  customers: {type: destinations}\n", Everything, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(loaded.Warnings, "\n"); !strings.Contains(w, "sinks a-internal, customers deliver to destinations") ||
		!strings.Contains(w, "allow_private: false") || !strings.Contains(w, "destinations.network") {
		t.Errorf("warnings %q, want the strictest policy (allow_private: false) named, and destinations.network", loaded.Warnings)
	}

	_, err = loadFile(t, "destinations:\n  network: {allow_private: true}\nsinks:\n  customers: {type: destinations, options: {ports: [443]}}\n", Everything, nil)
	if err == nil || !strings.Contains(err.Error(), "sinks.customers.options") || !strings.Contains(err.Error(), "declared once") {
		t.Errorf("aliases beside destinations.network: %v, want a problem at sinks.customers.options", err)
	}

	_, err = loadFile(t, "destinations:\n  network: {allow: [10.0.0.0/33], proxy: 'socks5://p:1080'}\nsinks:\n  customers: {type: destinations}\n", Everything, nil)
	if err == nil || !strings.Contains(err.Error(), "destinations.network") || !strings.Contains(err.Error(), "allow[0]") ||
		!strings.Contains(err.Error(), "proxy:") {
		t.Errorf("a bad allow list and proxy: %v, want both reported at destinations.network", err)
	}

	if _, err := loadFile(t, "destinations:\n  network: {allow: [10.1.0.0/16, '192.168.1.7'], deny: [203.0.113.0/24], ports: [443, 8443]}\nsinks:\n  customers: {type: destinations}\n", Everything, nil); err != nil {
		t.Errorf("a valid block: %v", err)
	}
}
