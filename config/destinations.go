package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/registry"
)

// DestinationsConfig is the destinations block: what holds for every
// tenant's destinations (docs/destinations.md).
type DestinationsConfig struct {
	Quotas QuotasConfig `mapstructure:"quotas"`
	// Network is the one network policy of every destination
	// (destinations_network.go); nil when the file declares none.
	Network *destinations.NetworkConfig `mapstructure:"network"`
}

// QuotasConfig is the destinations.quotas block, destinations.Quotas as
// plugins.yaml declares it; its defaults and their reasons are
// destinations.DefaultQuotas'.
type QuotasConfig struct {
	EndpointsPerTenant  int     `mapstructure:"endpoints_per_tenant" doc:"the most destinations one tenant may have; beyond it a create is refused with 422 (each of a tenant's events becomes one request per destination)"`
	TestEventsPerMinute int     `mapstructure:"test_events_per_minute" doc:"the most test events one tenant may send within any minute; beyond it a test event is refused with 429 and Retry-After"`
	TenantShareOfSlots  float64 `mapstructure:"tenant_share_of_slots" doc:"the part of a destinations sink's delivery slots on a relay (max_in_flight, by default relay.concurrency) one tenant's deliveries may hold together, above 0 and at most 1; a tenant whose endpoints are slow or many then delays only itself"`
}

// DestinationQuotas returns the tenants' quotas the destinations store
// enforces.
func (c *Config) DestinationQuotas() destinations.Quotas {
	return destinations.Quotas(c.Destinations.Quotas)
}

// checkDestinations reports quotas the store would refuse, at their keys.
func (c *Config) checkDestinations() []confschema.Problem {
	var problems []confschema.Problem
	q := c.Destinations.Quotas
	for _, v := range []struct {
		key   string
		value int
	}{{destinations.KeyEndpointsPerTenant, q.EndpointsPerTenant}, {destinations.KeyTestEventsPerMinute, q.TestEventsPerMinute}} {
		if v.value < 1 {
			problems = append(problems, confschema.Problem{Key: v.key, Message: fmt.Sprintf("must be at least 1, got %d", v.value)})
		}
	}
	if share := q.TenantShareOfSlots; share <= 0 || share > 1 {
		problems = append(problems, confschema.Problem{Key: destinations.KeyTenantShareOfSlots, Message: fmt.Sprintf("must be above 0 and at most 1, got %g", share)})
	}
	return problems
}

// DestinationSinks returns, sorted by name, the configured sinks that
// deliver to tenants' destinations: those whose type looks up the
// directory of destinations (destinations.DirectoryResource). The API, the
// console and the commands ask this rather than compare a type's name.
func (c *Config) DestinationSinks() []string {
	var names []string
	for name, spec := range c.Sinks {
		if t, _ := registry.Lookup(spec.Type); t.Uses(destinations.DirectoryResource) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// errNoDestinationSink is CheckDestinationSink's answer when no sink
// delivers to destinations.
var errNoDestinationSink = errors.New("no configured sink delivers to destinations; add one of type destinations under sinks")

// CheckDestinationSink reports a sink name that the configuration does
// not know, or whose sink does not deliver to tenants' destinations: a
// message addressed to a destination (enqueue_destination()) needs such a
// sink to sign and deliver it.
func (c *Config) CheckDestinationSink(name string) error {
	if err := c.CheckSink(name); err != nil {
		return err
	}
	sinks := c.DestinationSinks()
	switch {
	case slices.Contains(sinks, name):
		return nil
	case len(sinks) == 0:
		return fmt.Errorf("sink %q does not deliver to destinations: %w", name, errNoDestinationSink)
	default:
		return fmt.Errorf("sink %q does not deliver to destinations; the sinks that do: %s", name, strings.Join(sinks, ", "))
	}
}

// TestEventSink returns the sink test events go through: the first, by
// name, of DestinationSinks ("" when there is none).
func (c *Config) TestEventSink() string {
	if sinks := c.DestinationSinks(); len(sinks) > 0 {
		return sinks[0]
	}
	return ""
}
