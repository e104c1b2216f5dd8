package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
)

// networkKey is the block declaring the destinations' network policy.
const networkKey = "destinations.network"

// applyDestinationNetwork hands the one network policy of tenants'
// destinations to every built sink that delivers to them
// (destinations.NetworkUser), whichever sink a row or a test event goes
// through: destinations.network when the file declares it, else the
// strictest of those sinks' own allow_private, schemes and ports (their
// deprecated aliases), with a warning when they differ. Aliases beside
// the block are a problem: the policy is declared once.
func (c *Config) applyDestinationNetwork(built map[string]sink.Sink) (problems []confschema.Problem, warnings []string) {
	users := map[string]destinations.NetworkUser{}
	var declared []string
	var aliases []destinations.NetworkConfig
	for _, name := range slices.Sorted(maps.Keys(built)) {
		u, ok := built[name].(destinations.NetworkUser)
		if !ok {
			continue
		}
		users[name] = u
		opts, set := u.NetworkOptions()
		aliases = append(aliases, opts)
		if set {
			declared = append(declared, name)
		}
	}
	policy := c.Destinations.Network
	switch {
	case policy != nil:
		for _, name := range declared {
			problems = append(problems, confschema.Problem{Key: "sinks." + name + ".options", Message: fmt.Sprintf(
				"allow_private, schemes and ports are deprecated aliases of %s, which is declared: a destination's network policy is declared once, there", networkKey)})
		}
	case len(declared) > 0:
		strictest, err := destinations.Strictest(aliases...)
		if err != nil {
			return []confschema.Problem{{Key: "sinks." + declared[0] + ".options", Message: fmt.Sprintf(
				"the network options of sinks %s: %v; declare the policy once in %s", strings.Join(slices.Sorted(maps.Keys(users)), ", "), err, networkKey)}}, nil
		}
		if len(users) > 1 {
			warnings = append(warnings, fmt.Sprintf(
				"sinks %s deliver to destinations with network options of their own (allow_private, schemes, ports): the strictest of them applies to every destination (allow_private: %t); declare the policy once in %s",
				strings.Join(slices.Sorted(maps.Keys(users)), ", "), strictest.AllowPrivate, networkKey))
		}
		policy = &strictest
	default:
		def := destinations.DefaultNetworkConfig()
		policy = &def
	}
	network, err := policy.Network()
	if err != nil {
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			problems = append(problems, confschema.Problem{Key: networkKey, Message: e.Error()})
		}
		return problems, warnings
	}
	if len(problems) > 0 {
		return problems, warnings
	}
	for _, u := range users {
		u.UseNetwork(network)
	}
	return nil, warnings
}
