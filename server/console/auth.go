package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/portal"
)

// SessionCookie names the cookie a signed-in browser holds.
const SessionCookie = "outboxd_session"

// SessionLifetime is how long a sign-in lasts.
const SessionLifetime = 12 * time.Hour

// CSRFField names the form field that carries the CSRF token.
const CSRFField = "csrf"

// auth signs browsers in with a named token (or believes the user a
// trusted proxy names) and checks the CSRF token of every form.
//
// A session is "<name>.<expiry>.<mac>" (the name base64url-encoded): the
// MAC is an HMAC-SHA256 of name and expiry under a key derived from that
// token's SHA-256, so the cookie proves the token was known without
// containing it, every pod with the same tokens accepts it, and changing a
// token signs its holder out. The role is the token's as configured now,
// never the cookie's. A form's CSRF token is an HMAC of the session under
// the same key: a page on another site can neither read it nor compute
// it. A proxy's user and, without any token or proxy (a loopback listen),
// everyone are signed in without a session; their CSRF tokens are keyed by
// a random key of this process.
type auth struct {
	access *access.Authenticator
	random []byte
	// signIn keys the CSRF token of the sign-in form: derived from the
	// tokens, so every pod with them accepts it.
	signIn []byte
}

func newAuth(a *access.Authenticator) (*auth, error) {
	au := &auth{access: a, random: make([]byte, 32)}
	if _, err := rand.Read(au.random); err != nil {
		return nil, fmt.Errorf("console: CSRF key: %w", err)
	}
	au.signIn = au.random
	if f := a.Fingerprint(); f != nil {
		au.signIn = mac(f, "outboxd console sign-in key")
	}
	return au, nil
}

func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// sessionKey is the key of t's sessions.
func sessionKey(t access.Token) []byte {
	return mac(t.SHA256[:], "outboxd console session key")
}

// newSession returns a session of t valid until expiry.
func newSession(t access.Token, expiry time.Time) string {
	name := base64.RawURLEncoding.EncodeToString([]byte(t.Name))
	exp := strconv.FormatInt(expiry.Unix(), 10)
	return name + "." + exp + "." + base64.RawURLEncoding.EncodeToString(mac(sessionKey(t), "session", t.Name, exp))
}

// visitor is who a request comes from, and the session it holds ("" for
// none).
type visitor struct {
	id      access.Identity
	session string
	key     []byte // of its CSRF tokens
}

// identify returns who r comes from; ok is false for someone not signed
// in.
func (a *auth) identify(r *http.Request) (visitor, bool) {
	if a.access.Open() {
		id, _ := a.access.Authenticate(r)
		return visitor{id: id, key: a.random}, true
	}
	if id, ok, _ := a.access.FromProxy(r); ok {
		return visitor{id: id, key: a.random}, true
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return visitor{}, false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 {
		return visitor{}, false
	}
	name, nameErr := base64.RawURLEncoding.DecodeString(parts[0])
	unix, expErr := strconv.ParseInt(parts[1], 10, 64)
	got, macErr := base64.RawURLEncoding.DecodeString(parts[2])
	if nameErr != nil || expErr != nil || macErr != nil || time.Now().After(time.Unix(unix, 0)) {
		return visitor{}, false
	}
	t, ok := a.access.Named(string(name))
	if !ok {
		return visitor{}, false
	}
	key := sessionKey(t)
	if !hmac.Equal(got, mac(key, "session", t.Name, parts[1])) {
		return visitor{}, false
	}
	return visitor{id: access.Identity{Name: t.Name, Role: t.Role, Source: access.ClientHost(r)}, session: c.Value, key: key}, true
}

// csrf is the CSRF token of the forms served to v (a visitor not signed
// in gets one keyed by the process, for the sign-in form).
func (a *auth) csrf(v visitor) string {
	key := v.key
	if key == nil {
		key = a.signIn
	}
	return base64.RawURLEncoding.EncodeToString(mac(key, "csrf", v.id.Name, v.session))
}

// checkCSRF reports whether a form posted by v carries its CSRF token.
func (a *auth) checkCSRF(r *http.Request, v visitor) bool {
	want := a.csrf(v)
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue(CSRFField)), []byte(want)) == 1
}

type visitorKey struct{}

// visitorOf returns the visitor require found for r.
func visitorOf(r *http.Request) visitor {
	v, _ := r.Context().Value(visitorKey{}).(visitor)
	return v
}

// require sends a browser that is not signed in to the sign-in page and
// refuses a form without its CSRF token. The sign-in page and the static
// files are open.
func (a *auth) require(next http.Handler, c *Console) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open := r.URL.Path == "/signin" || strings.HasPrefix(r.URL.Path, "/static/")
		v, signedIn := a.identify(r)
		if !open && !signedIn {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, http.StatusUnauthorized, "Sign in first.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if !a.checkCSRF(r, v) {
				c.fail(w, r, http.StatusForbidden, "This form is out of date or did not come from this console (CSRF token missing or wrong). Reload the page and try again.")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), visitorKey{}, v)))
	})
}

// allow refuses, with 403 naming the role, a request whose visitor's
// role does not grant need: the pages hide such actions, and the server
// refuses them all the same.
func (c *Console) allow(need access.Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id := visitorOf(r).id; !id.Role.Allows(need) {
			c.fail(w, r, http.StatusForbidden, fmt.Sprintf("This needs the %s role; %s has the %s role.", need, id.Name, id.Role))
			return
		}
		h(w, r)
	}
}

// maxFormBytes bounds a form: a selection of dead letters' ids at most.
const maxFormBytes = 1 << 20

// setSession gives the browser a session cookie: HttpOnly, SameSite
// Strict, and Secure when the request came over TLS (directly or, as a
// proxy says, to it).
func (a *auth) setSession(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     SessionCookie,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   portal.OverTLS(r),
	})
}

// signInNeeded reports whether the console asks for a token: tokens
// are configured and the request is not a trusted proxy's.
func (c *Console) signInNeeded(r *http.Request) bool {
	_, signedIn := c.auth.identify(r)
	return !signedIn
}

func (c *Console) getSignIn(w http.ResponseWriter, r *http.Request) {
	if !c.signInNeeded(r) {
		http.Redirect(w, r, localPath(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "signin", map[string]any{"Next": localPath(r.URL.Query().Get("next"))})
}

func (c *Console) postSignIn(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.PostFormValue("next"))
	if !c.signInNeeded(r) {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	t, ok := c.auth.access.Match(r.PostFormValue("token"))
	if !ok {
		c.render(w, r, http.StatusUnauthorized, "signin", map[string]any{"Next": next, "Error": "That is not a token of this outboxd."})
		return
	}
	if !t.Role.Allows(signInRole) {
		// It could open no page: say so here, not on every page after.
		c.render(w, r, http.StatusForbidden, "signin", map[string]any{"Next": next,
			"Error": fmt.Sprintf("The token %s has the %s role, which may not read the console: it needs the %s role or above.", t.Name, t.Role, signInRole)})
		return
	}
	c.auth.setSession(w, r, newSession(t, time.Now().Add(SessionLifetime)), int(SessionLifetime.Seconds()))
	c.opt.Logger.Info("console: signed in", "token", t.Name, "role", t.Role, "from", access.ClientHost(r))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) postSignOut(w http.ResponseWriter, r *http.Request) {
	c.auth.setSession(w, r, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// localPath keeps a redirect target on this site: p when it is a path of
// this origin, else "/". Browsers drop tabs and newlines from a URL and
// read a backslash as a slash, so "/\t/evil.example" and "/\evil.example"
// leave the site as "//evil.example" does: p must start with one slash
// followed by neither a slash nor a backslash, hold no backslash, control
// character or space anywhere, and parse as a path alone (no scheme, no
// host), whose decoded form obeys the same rules ("/%2F/evil.example").
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !plainPath(p) || !plainPath(u.Path) {
		return "/"
	}
	return p
}

// plainPath reports whether p starts with exactly one slash and holds no
// backslash, control character or white space.
func plainPath(p string) bool {
	rest, rooted := strings.CutPrefix(p, "/")
	return rooted && !strings.HasPrefix(rest, "/") &&
		!strings.ContainsFunc(p, func(r rune) bool { return r == '\\' || unicode.IsControl(r) || unicode.IsSpace(r) })
}
