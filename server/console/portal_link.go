package console

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/outboxd/outboxd/destinations"
)

// The tenant portal's links and sessions (docs/destinations.md, "Tenant
// portal").
const (
	// DefaultPortalLinkLifetime is how long a portal link, and the session
	// it opens, lasts unless asked otherwise.
	DefaultPortalLinkLifetime = time.Hour
	// MaxPortalLinkLifetime bounds it: a link is a bearer credential,
	// and nothing revokes one before it expires but dropping its key.
	MaxPortalLinkLifetime = 24 * time.Hour
	// PortalPath is where the portal's pages are; its session cookie is
	// sent there and nowhere else.
	PortalPath = "/portal"
	// PortalOpenPath opens a link: it checks the signature, sets the
	// session cookie and goes on to the portal.
	PortalOpenPath = PortalPath + "/open"
	// PortalCookie names the portal's session cookie.
	PortalCookie = "outboxd_portal"
	// portalKeyPurpose is what the portal's signing keys are derived
	// for (destinations.Keyring.Derive): no other use shares them.
	portalKeyPurpose = "outboxd tenant portal links and sessions v1"
)

// The parameters of a portal link.
const (
	linkTenant  = "tenant"
	linkExpires = "expires"
	linkKey     = "key"
	linkSig     = "sig"
)

// PortalLinks signs the tenant portal's links and checks them and the
// sessions they open. Its keys are derived from the destinations
// keyring (destinations.EnvSecretsKey), so every process holding the
// same keyring accepts what any of them signed and no secret of its own
// is needed. It signs with the keyring's first key and accepts every key
// the keyring holds: links and sessions signed under a key dropped from
// the keyring are refused.
//
// A link is PortalOpenPath?tenant=T&expires=UNIX&key=ID&sig=MAC, the MAC
// an HMAC-SHA256 of the tenant and expiry; a session is
// "<key>.<tenant>.<expiry>.<MAC>" (key and tenant base64url-encoded)
// under the same key with another label, so neither can stand for the
// other.
type PortalLinks struct {
	current string
	keys    map[string][]byte
}

// NewPortalLinks returns the links signed with keys derived from keys.
func NewPortalLinks(keys *destinations.Keyring) (*PortalLinks, error) {
	derived, err := keys.Derive(portalKeyPurpose)
	if err != nil {
		return nil, fmt.Errorf("console: portal keys: %w", err)
	}
	return &PortalLinks{current: keys.Current(), keys: derived}, nil
}

// CheckLifetime reports whether d is a portal link's lifetime: positive
// and at most MaxPortalLinkLifetime.
func CheckLifetime(d time.Duration) error {
	if d <= 0 || d > MaxPortalLinkLifetime {
		return fmt.Errorf("a portal link lasts more than 0 and at most %s, not %s", MaxPortalLinkLifetime, d)
	}
	return nil
}

// Link returns the URL, below base (scheme and host, as BaseURL gives
// it), that opens tenant's portal until expiresAt (to the second), and
// that time.
func (p *PortalLinks) Link(base, tenant string, expiresAt time.Time) (string, time.Time, error) {
	if err := destinations.CheckTenant(tenant); err != nil {
		return "", time.Time{}, err
	}
	exp := strconv.FormatInt(expiresAt.Unix(), 10)
	q := url.Values{
		linkTenant:  {tenant},
		linkExpires: {exp},
		linkKey:     {p.current},
		linkSig:     {base64.RawURLEncoding.EncodeToString(mac(p.keys[p.current], "link", tenant, exp))},
	}
	return strings.TrimSuffix(base, "/") + PortalOpenPath + "?" + q.Encode(), time.Unix(expiresAt.Unix(), 0).UTC(), nil
}

// BaseURL is the scheme and host r was sent to: where a link made for it
// is opened.
func BaseURL(r *http.Request) string {
	scheme := "http"
	if overTLS(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Why a link or session is refused.
var (
	errLinkExpired = errors.New("this portal link has expired")
	errLinkInvalid = errors.New("this portal link is not valid: it was changed, or not made by this outboxd")
)

// portalSession is an open portal session: the tenant it is for, until
// when, and the cookie's value (which its CSRF tokens are bound to).
type portalSession struct {
	tenant  string
	expires time.Time
	value   string
	key     []byte
}

// open checks a link's query at now and returns the session it opens.
func (p *PortalLinks) open(q url.Values, now time.Time) (portalSession, error) {
	tenant, exp, keyID := q.Get(linkTenant), q.Get(linkExpires), q.Get(linkKey)
	got, err := base64.RawURLEncoding.DecodeString(q.Get(linkSig))
	key, known := p.keys[keyID]
	unix, expErr := strconv.ParseInt(exp, 10, 64)
	if err != nil || !known || expErr != nil || destinations.CheckTenant(tenant) != nil ||
		!hmac.Equal(got, mac(key, "link", tenant, exp)) {
		return portalSession{}, errLinkInvalid
	}
	expires := time.Unix(unix, 0)
	if !now.Before(expires) {
		return portalSession{}, errLinkExpired
	}
	return p.session(keyID, tenant, expires), nil
}

// session is the session of tenant until expires, signed with key keyID.
func (p *PortalLinks) session(keyID, tenant string, expires time.Time) portalSession {
	exp := strconv.FormatInt(expires.Unix(), 10)
	key := p.keys[keyID]
	value := strings.Join([]string{
		base64.RawURLEncoding.EncodeToString([]byte(keyID)),
		base64.RawURLEncoding.EncodeToString([]byte(tenant)),
		exp,
		base64.RawURLEncoding.EncodeToString(mac(key, "session", tenant, exp)),
	}, ".")
	return portalSession{tenant: tenant, expires: expires, value: value, key: key}
}

// identify returns the portal session r holds; ok is false for none, or
// one forged, expired or signed under a key the keyring no longer holds.
func (p *PortalLinks) identify(r *http.Request, now time.Time) (portalSession, bool) {
	c, err := r.Cookie(PortalCookie)
	if err != nil {
		return portalSession{}, false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 4 {
		return portalSession{}, false
	}
	keyID, keyErr := base64.RawURLEncoding.DecodeString(parts[0])
	tenant, tenantErr := base64.RawURLEncoding.DecodeString(parts[1])
	unix, expErr := strconv.ParseInt(parts[2], 10, 64)
	got, macErr := base64.RawURLEncoding.DecodeString(parts[3])
	key, known := p.keys[string(keyID)]
	if keyErr != nil || tenantErr != nil || expErr != nil || macErr != nil || !known ||
		!hmac.Equal(got, mac(key, "session", string(tenant), parts[2])) || !now.Before(time.Unix(unix, 0)) {
		return portalSession{}, false
	}
	return portalSession{tenant: string(tenant), expires: time.Unix(unix, 0), value: c.Value, key: key}, true
}

// csrf is the CSRF token of the forms served to session s.
func (s portalSession) csrf() string {
	return base64.RawURLEncoding.EncodeToString(mac(s.key, "csrf", s.value))
}

// checkCSRF reports whether a form posted in session s carries its CSRF
// token.
func (s portalSession) checkCSRF(r *http.Request) bool {
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue(CSRFField)), []byte(s.csrf())) == 1
}

// overTLS reports whether r came over TLS, directly or, as a proxy says,
// to it.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
