package server

import (
	"slices"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/destinations"
)

// shareTenants bounds, in rc, each tenant's share of the delivery slots of
// every sink of cfg that delivers to destinations
// (destinations.quotas.tenant_share_of_slots): the relay learns a
// destination's tenant from dir. Without a directory (no such sink) it
// leaves rc alone.
func shareTenants(rc *relay.Config, cfg *config.Config, dir *destinations.Directory) {
	if dir == nil {
		return
	}
	sinks := cfg.DestinationSinks()
	// A copy: rc's sinks are the configuration's own.
	rc.Sinks = slices.Clone(rc.Sinks)
	share := &relay.TenantShare{Of: dir.TenantOf, Share: cfg.DestinationQuotas().TenantShareOfSlots}
	for i := range rc.Sinks {
		if slices.Contains(sinks, rc.Sinks[i].Name) {
			rc.Sinks[i].TenantShare = share
		}
	}
}
