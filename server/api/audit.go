package api

import (
	"net/http"
	"time"

	"github.com/outboxd/outboxd/core/audit"
)

// auditPage is the answer of GET /v1/audit.
type auditPage struct {
	Entries []audit.Entry `json:"entries"`
}

// getAudit lists the audit trail newest first: since (an RFC 3339 time or
// a duration back from now; absent: everything kept) and limit (at most
// audit.MaxLimit).
func (s *API) getAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f audit.Filter
	if v := q.Get("since"); v != "" {
		var err error
		if f.Since, err = audit.ParseSince(v, time.Now()); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	limit, err := positiveParam(q, "limit")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.Limit = int(min(limit, audit.MaxLimit))
	entries, err := s.Operator.Audit().List(r.Context(), s.DB, f)
	if err != nil {
		s.internalError(w, r, "list the audit trail", err)
		return
	}
	writeBody(w, http.StatusOK, auditPage{Entries: entries})
}
