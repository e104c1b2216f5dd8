package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/outboxd/outboxd/core/audit"
)

// auditPerPage bounds the audit page.
const auditPerPage = 200

// auditSince is how far back the audit page looks unless asked.
const auditSince = "24h"

// getAudit lists the audit trail, newest first: who did which operator
// action, on what, how many things it changed, when and from where.
func (c *Console) getAudit(w http.ResponseWriter, r *http.Request) {
	since := strings.TrimSpace(r.URL.Query().Get("since"))
	if since == "" {
		since = auditSince
	}
	from, err := audit.ParseSince(since, time.Now())
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	entries, err := c.opt.Operator.Audit().List(ctx, c.opt.DB, audit.Filter{Since: from, Limit: auditPerPage})
	if err != nil {
		c.internalError(w, r, "read the audit trail", err)
		return
	}
	c.render(w, r, http.StatusOK, "audit", map[string]any{"Since": since, "Entries": entries, "Full": len(entries) == auditPerPage})
}
