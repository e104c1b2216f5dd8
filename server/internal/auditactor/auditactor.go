// Package auditactor records who an HTTP request comes from as the audit
// trail's actor, alike for the API and the console (and the portal's
// tenant through it).
package auditactor

import (
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/access"
)

// Of is the identity id as the audit trail records it.
func Of(id access.Identity) audit.Actor {
	return audit.Actor{Name: id.Name, Role: string(id.Role), Source: id.Source}
}
