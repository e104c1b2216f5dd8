package console

import (
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
)

// SessionCookie names the cookie a signed-in browser holds.
const SessionCookie = "outboxd_session"

// SessionLifetime is how long a sign-in lasts.
const SessionLifetime = 12 * time.Hour

// CSRFField names the form field that carries the CSRF token.
const CSRFField = "csrf"

// auth signs browsers in with the API token and checks the CSRF token of
// every form.
//
// A session is "<expiry>.<mac>": the MAC is an HMAC-SHA256 of the expiry
// under a key derived from the token, so the cookie proves the token was
// known without containing it, every pod with the same token accepts it,
// and changing the token signs everyone out. A form's CSRF token is an
// HMAC of the session under the same key: a page on another site can
// neither read it nor compute it. Without a token (a loopback listen)
// there is no sign-in, and the CSRF tokens are keyed by a random key of
// this process.
type auth struct {
	token []byte // nil: no sign-in
	key   []byte
}

func newAuth(token string) (*auth, error) {
	a := &auth{}
	if token == "" {
		a.key = make([]byte, 32)
		if _, err := rand.Read(a.key); err != nil {
			return nil, fmt.Errorf("console: CSRF key: %w", err)
		}
		return a, nil
	}
	a.token = []byte(token)
	a.key = a.mac([]byte(token), "outboxd console session key")
	return a, nil
}

func (a *auth) mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// newSession returns a session value valid until expiry.
func (a *auth) newSession(expiry time.Time) string {
	exp := strconv.FormatInt(expiry.Unix(), 10)
	return exp + "." + base64.RawURLEncoding.EncodeToString(a.mac(a.key, "session", exp))
}

// session returns the request's valid session value, or "".
func (a *auth) session(r *http.Request) string {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return ""
	}
	exp, mac, ok := strings.Cut(c.Value, ".")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || time.Now().After(time.Unix(unix, 0)) {
		return ""
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, a.mac(a.key, "session", exp)) {
		return ""
	}
	return c.Value
}

// signedIn reports whether r may see the console.
func (a *auth) signedIn(r *http.Request) bool { return a.token == nil || a.session(r) != "" }

// csrf is the CSRF token of the forms served to r.
func (a *auth) csrf(r *http.Request) string {
	return base64.RawURLEncoding.EncodeToString(a.mac(a.key, "csrf", a.session(r)))
}

// checkCSRF reports whether a form posted by r carries its CSRF token.
func (a *auth) checkCSRF(r *http.Request) bool {
	want := a.csrf(r)
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue(CSRFField)), []byte(want)) == 1
}

// tokenMatches compares a submitted token with the configured one in
// constant time (both hashed first, so not even the length leaks).
func (a *auth) tokenMatches(given string) bool {
	want, got := sha256.Sum256(a.token), sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(want[:], got[:]) == 1
}

// require sends a browser that is not signed in to the sign-in page and
// refuses a form without its CSRF token. The sign-in page and the static
// files are open.
func (a *auth) require(next http.Handler, c *Console) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open := r.URL.Path == "/signin" || strings.HasPrefix(r.URL.Path, "/static/")
		if !open && !a.signedIn(r) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, http.StatusUnauthorized, "Sign in first.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if !a.checkCSRF(r) {
				c.fail(w, r, http.StatusForbidden, "This form is out of date or did not come from this console (CSRF token missing or wrong). Reload the page and try again.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
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
		Secure:   r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"),
	})
}

func (c *Console) getSignIn(w http.ResponseWriter, r *http.Request) {
	if c.auth.token == nil || c.auth.signedIn(r) {
		http.Redirect(w, r, localPath(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "signin", map[string]any{"Next": localPath(r.URL.Query().Get("next"))})
}

func (c *Console) postSignIn(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.PostFormValue("next"))
	if c.auth.token == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if !c.auth.tokenMatches(r.PostFormValue("token")) {
		c.render(w, r, http.StatusUnauthorized, "signin", map[string]any{"Next": next, "Error": "That is not the token."})
		return
	}
	c.auth.setSession(w, r, c.auth.newSession(time.Now().Add(SessionLifetime)), int(SessionLifetime.Seconds()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) postSignOut(w http.ResponseWriter, r *http.Request) {
	c.auth.setSession(w, r, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// localPath keeps a redirect target on this site: a path, never a URL
// (//evil.example or /\evil.example would leave it).
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") {
		return "/"
	}
	return p
}
