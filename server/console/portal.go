package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/portal"
)

// The tenant portal: the pages a customer opens with a signed link
// (POST /v1/tenants/{tenant}/portal, package server/portal) to manage its
// own endpoints. They are the destination pages (destinations.go) in the
// portal's scope, whose tenant is always the session's: no path, query or
// form names a tenant, so there is none to change.

// portalRole is the role the audit trail and the log record for a tenant
// acting through its portal: no team role, it grants the portal's pages
// only.
const portalRole = "tenant"

type portalSessionKey struct{}

// portalSessionOf returns the portal session requirePortalSession found
// for r (or the link opened), and whether there is one.
func portalSessionOf(r *http.Request) (portal.Session, bool) {
	s, ok := r.Context().Value(portalSessionKey{}).(portal.Session)
	return s, ok
}

// inPortal reports whether r is for a portal page: it is rendered as the
// tenant's, never with the console's navigation or sign-in.
func inPortal(r *http.Request) bool {
	return r.URL.Path == portal.Path || strings.HasPrefix(r.URL.Path, portal.Path+"/")
}

func (c *Console) portalRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+portal.OpenPath, c.getPortalOpen)
	mux.HandleFunc("GET "+portal.Path+"/{$}", c.portalScope(c.listDestinations))
	mux.HandleFunc("POST "+portal.Path+"/destinations", c.portalScope(c.createDestination))
	mux.HandleFunc("GET "+portal.Path+"/destinations/{id}", c.portalScope(c.showDestination))
	mux.HandleFunc("GET "+portal.Path+"/event-types", c.portalScope(c.getEventTypes))
	for action, h := range c.destinationActions() {
		mux.HandleFunc("POST "+portal.Path+"/destinations/{id}/"+action, c.portalScope(h))
	}
	mux.HandleFunc("POST "+portal.Path+"/signout", c.postPortalSignOut)
	mux.HandleFunc(portal.Path+"/", c.notFound)
	return c.requirePortalSession(mux)
}

// portalScope runs h for the session's tenant.
func (c *Console) portalScope(h destinationHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, _ := portalSessionOf(r) // requirePortalSession let only sessions through
		h(w, r, destinationScope{Portal: true, Tenant: s.Tenant, Minter: s.Minter})
	}
}

// requirePortalSession refuses every portal page but the link's to a
// browser without a valid session, and every form without the session's
// CSRF token; without a keyring there is no portal.
func (c *Console) requirePortalSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.opt.Portal == nil || c.opt.Destinations == nil {
			c.fail(w, r, http.StatusNotFound, "There is no tenant portal here: it needs "+destinations.EnvSecretsKey+" set on this outboxd.")
			return
		}
		if r.URL.Path == portal.OpenPath {
			next.ServeHTTP(w, r)
			return
		}
		s, ok := c.opt.Portal.Identify(r, time.Now())
		if !ok {
			c.fail(w, r, http.StatusUnauthorized, "Your session has ended, or this browser has none: open this page again with a new link.")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), portalSessionKey{}, s))
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if !s.CheckCSRF(r.PostFormValue(CSRFField)) {
				c.fail(w, r, http.StatusForbidden, "This form is out of date or did not come from this page (CSRF token missing or wrong). Reload the page and try again.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// getPortalOpen opens a portal link: a valid one sets the session cookie
// and goes on to the tenant's endpoints; an expired or altered one is
// refused with a page saying which.
//
// The page it answers goes on by itself (a meta refresh) rather than
// redirecting: a link followed from another site (a customer's email or
// dashboard) is a cross-site navigation, and a browser does not send a
// SameSite=Strict cookie along its redirects; the page's own navigation
// is same-site.
func (c *Console) getPortalOpen(w http.ResponseWriter, r *http.Request) {
	s, err := c.opt.Portal.Open(r.URL.Query(), time.Now())
	if err != nil {
		c.opt.Logger.InfoContext(r.Context(), "portal: a link was refused", "reason", err.Error(), "from", access.ClientHost(r))
		msg := "This link is not valid: it was changed, or it was not made by this outboxd. Ask for a new link."
		if errors.Is(err, portal.ErrLinkExpired) {
			msg = "This link has expired. Ask for a new link."
		}
		c.fail(w, r, http.StatusForbidden, msg)
		return
	}
	c.setPortalSession(w, r, s.Value, int(time.Until(s.Expires)/time.Second))
	c.opt.Logger.InfoContext(r.Context(), "portal: opened", "tenant", s.Tenant, "until", s.Expires.UTC(), "from", access.ClientHost(r))
	r = r.WithContext(context.WithValue(r.Context(), portalSessionKey{}, s))
	c.render(w, r, http.StatusOK, "portal_open", map[string]any{"Next": portal.Path + "/"})
}

// postPortalSignOut ends the browser's portal session. The link itself
// opens a new one until it expires.
func (c *Console) postPortalSignOut(w http.ResponseWriter, r *http.Request) {
	c.setPortalSession(w, r, "", -1)
	// The page saying so is rendered as for a browser without a session:
	// no tenant, no form.
	r = r.WithContext(context.WithValue(r.Context(), portalSessionKey{}, nil))
	c.render(w, r, http.StatusOK, "portal_open", map[string]any{})
}

// setPortalSession sets the portal's session cookie (maxAge < 0 removes
// it): sent to the portal's pages only, HttpOnly, SameSite Strict, and
// Secure over TLS.
func (c *Console) setPortalSession(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     portal.Cookie,
		Value:    value,
		Path:     portal.Path,
		MaxAge:   maxAge,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   portal.OverTLS(r),
	})
}
