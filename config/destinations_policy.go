package config

import (
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/registry"
)

// DestinationNetwork returns the one network policy of tenants'
// destinations as the sinks delivering to them hold it
// (applyDestinationNetwork): the API, the console, the portal and the
// commands hand it to the destinations' Store (Store.WithNetwork), which
// checks a destination's URL against it when it is created, changed or
// sent a test event. Without such a sink built it is destinations.network,
// or the default policy; nil only for a configuration with problems.
func (c *Config) DestinationNetwork() *destinations.Network {
	for _, sc := range c.sinks {
		if u, ok := sc.Sink.(destinations.NetworkUser); ok {
			return u.Network()
		}
	}
	declared := destinations.DefaultNetworkConfig()
	if c.Destinations.Network != nil {
		declared = *c.Destinations.Network
	}
	n, err := declared.Network()
	if err != nil {
		return nil // a problem at destinations.network: the configuration is not used
	}
	return n
}

// keptOptions are the sinks' options a DatabaseOnly load keeps: those of
// onlySink, and those of the sinks delivering to destinations, whose
// network options (deprecated aliases of destinations.network) the
// commands creating destinations need to check URLs as serve delivers
// them (DestinationNetwork); such options hold no secret.
func keptOptions(options, settings map[string]any, onlySink string) map[string]any {
	kept := map[string]any{}
	for name, opts := range options {
		spec, _ := sinksOf(settings)[name].(map[string]any)
		typ, _ := spec["type"].(string)
		if t, _ := registry.Lookup(typ); name == onlySink || deliversToDestinations(t) {
			kept[name] = opts
		}
	}
	return kept
}

// deliversToDestinations reports whether sinks of type t deliver to
// tenants' destinations: they look up the directory.
func deliversToDestinations(t registry.Type) bool { return t.Uses(destinations.DirectoryResource) }
