package destinations

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/audit"
)

// portalLinkDetail is a portal link's audit entry detail: until when the
// link, a bearer credential, opens the tenant's portal.
type portalLinkDetail struct {
	ExpiresAt time.Time `json:"expires_at"`
}

// portalLinkFilter is a portal link's audit entry filter: the tenant.
type portalLinkFilter struct {
	Tenant string `json:"tenant"`
}

// RecordPortalLink records in the audit trail, as actor's, that actor
// minted a link to tenant's portal lasting until expiresAt
// (audit.ActionPortalLink): a link is a credential to act as the tenant,
// so who handed one out, for whom and until when is kept with the
// actions done through it (recorded as the tenant's, by the minter).
func (s *Store) RecordPortalLink(ctx context.Context, db DB, actor audit.Actor, tenant string, expiresAt time.Time) error {
	if err := CheckTenant(tenant); err != nil {
		return err
	}
	if err := s.trail.Write(ctx, db, actor, audit.Record{Action: audit.ActionPortalLink, Filter: portalLinkFilter{tenant}, Count: 1,
		Detail: portalLinkDetail{ExpiresAt: expiresAt.UTC()}}); err != nil {
		return fmt.Errorf("destinations: record the portal link for tenant %s: %w", tenant, err)
	}
	return nil
}
