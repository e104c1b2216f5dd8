// Package portal is the tenant portal's links and sessions: a link signed
// for one tenant (POST /v1/tenants/{tenant}/portal, `outboxd destinations
// portal`) opens the portal's pages, which the console serves below
// [Path], in a session of that tenant only (docs/destinations.md, "Tenant
// portal"). The API signs links, the console opens them and checks the
// sessions: both through [Links].
package portal

import (
	"crypto/hmac"
	"crypto/sha256"
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

// The tenant portal's links and sessions.
const (
	// DefaultLinkLifetime is how long a portal link, and the session it
	// opens, lasts unless asked otherwise.
	DefaultLinkLifetime = time.Hour
	// MaxLinkLifetime bounds it: a link is a bearer credential, and
	// nothing revokes one before it expires but dropping its key.
	MaxLinkLifetime = 24 * time.Hour
	// Path is where the portal's pages are; its session cookie is sent
	// there and nowhere else.
	Path = "/portal"
	// OpenPath opens a link: it checks the signature, sets the session
	// cookie and goes on to the portal.
	OpenPath = Path + "/open"
	// Cookie names the portal's session cookie.
	Cookie = "outboxd_portal"
	// keyPurpose is what the portal's signing keys are derived for
	// (destinations.Keyring.Derive): no other use shares them.
	keyPurpose = "outboxd tenant portal links and sessions v1"
)

// The parameters of a portal link.
const (
	linkTenant  = "tenant"
	linkExpires = "expires"
	linkKey     = "key"
	linkSig     = "sig"
	// linkBy names who minted the link: what is done through it is
	// recorded as the tenant's, by this link's minter.
	linkBy = "by"
)

// Links signs the tenant portal's links and checks them and the
// sessions they open. Its keys are derived from the destinations
// keyring (destinations.EnvSecretsKey), so every process holding the
// same keyring accepts what any of them signed and no secret of its own
// is needed. It signs with the keyring's first key and accepts every key
// the keyring holds: links and sessions signed under a key dropped from
// the keyring are refused.
//
// A link is OpenPath?tenant=T&expires=UNIX&by=M&key=ID&sig=MAC, the MAC
// an HMAC-SHA256 of the tenant, expiry and minter; a session is
// "<key>.<tenant>.<expiry>.<MAC>.<minter>" (all but the expiry
// base64url-encoded) under the same key with another label, so neither
// can stand for the other. Links and sessions made before links named
// their minter (no by, four parts) are accepted as minted by nobody
// named ("").
type Links struct {
	current string
	keys    map[string][]byte
}

// NewLinks returns the links signed with keys derived from keys.
func NewLinks(keys *destinations.Keyring) (*Links, error) {
	derived, err := keys.Derive(keyPurpose)
	if err != nil {
		return nil, fmt.Errorf("portal: keys: %w", err)
	}
	return &Links{current: keys.Current(), keys: derived}, nil
}

// CheckLifetime reports whether d is a portal link's lifetime: positive
// and at most MaxLinkLifetime.
func CheckLifetime(d time.Duration) error {
	if d <= 0 || d > MaxLinkLifetime {
		return fmt.Errorf("a portal link lasts more than 0 and at most %s, not %s", MaxLinkLifetime, d)
	}
	return nil
}

// Link returns the URL, below base (scheme and host, as BaseURL gives
// it), that opens tenant's portal until expiresAt (to the second), and
// that time; minter is who asked for it (an audit actor's name), signed
// into the link and its sessions so that what is done through it is
// recorded as the tenant's by minter. Record the minting in the audit
// trail (destinations.Store.RecordPortalLink) before handing it out.
func (p *Links) Link(base, tenant, minter string, expiresAt time.Time) (string, time.Time, error) {
	if err := destinations.CheckTenant(tenant); err != nil {
		return "", time.Time{}, err
	}
	exp := strconv.FormatInt(expiresAt.Unix(), 10)
	q := url.Values{
		linkTenant:  {tenant},
		linkExpires: {exp},
		linkKey:     {p.current},
		linkSig:     {base64.RawURLEncoding.EncodeToString(linkMAC(p.keys[p.current], tenant, exp, minter))},
	}
	if minter != "" {
		q.Set(linkBy, minter)
	}
	return strings.TrimSuffix(base, "/") + OpenPath + "?" + q.Encode(), time.Unix(expiresAt.Unix(), 0).UTC(), nil
}

// BaseURL is the scheme and host r was sent to: where a link made for it
// is opened.
func BaseURL(r *http.Request) string {
	scheme := "http"
	if OverTLS(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Why a link or session is refused.
var (
	// ErrLinkExpired refuses a genuine link past its expiry.
	ErrLinkExpired = errors.New("this portal link has expired")
	errLinkInvalid = errors.New("this portal link is not valid: it was changed, or not made by this outboxd")
)

// Session is an open portal session: the tenant it is for, until when,
// who minted the link that opened it, and the cookie's value (which its
// CSRF tokens are bound to).
type Session struct {
	Tenant  string
	Expires time.Time
	Minter  string
	Value   string
	key     []byte
}

// Open checks a link's query at now and returns the session it opens:
// ErrLinkExpired for a genuine link past its expiry, another error for a
// link altered or not signed under a key of the keyring.
func (p *Links) Open(q url.Values, now time.Time) (Session, error) {
	tenant, exp, keyID, minter := q.Get(linkTenant), q.Get(linkExpires), q.Get(linkKey), q.Get(linkBy)
	got, err := base64.RawURLEncoding.DecodeString(q.Get(linkSig))
	key, known := p.keys[keyID]
	unix, expErr := strconv.ParseInt(exp, 10, 64)
	if err != nil || !known || expErr != nil || destinations.CheckTenant(tenant) != nil ||
		!hmac.Equal(got, linkMAC(key, tenant, exp, minter)) {
		return Session{}, errLinkInvalid
	}
	expires := time.Unix(unix, 0)
	if !now.Before(expires) {
		return Session{}, ErrLinkExpired
	}
	return p.session(keyID, tenant, minter, expires), nil
}

// SessionValue is the session cookie's value of tenant until expires, as
// a link minted by minter and opened now sets it: for tests that need a
// genuine session the clock has passed.
func (p *Links) SessionValue(tenant, minter string, expires time.Time) string {
	return p.session(p.current, tenant, minter, expires).Value
}

// session is the session of tenant until expires, opened by minter's
// link, signed with key keyID.
func (p *Links) session(keyID, tenant, minter string, expires time.Time) Session {
	exp := strconv.FormatInt(expires.Unix(), 10)
	key := p.keys[keyID]
	parts := []string{
		base64.RawURLEncoding.EncodeToString([]byte(keyID)),
		base64.RawURLEncoding.EncodeToString([]byte(tenant)),
		exp,
		base64.RawURLEncoding.EncodeToString(sessionMAC(key, tenant, exp, minter)),
	}
	if minter != "" {
		parts = append(parts, base64.RawURLEncoding.EncodeToString([]byte(minter)))
	}
	return Session{Tenant: tenant, Expires: expires, Minter: minter, Value: strings.Join(parts, "."), key: key}
}

// Identify returns the portal session r holds at now; ok is false for
// none, or one forged, expired or signed under a key the keyring no longer
// holds.
func (p *Links) Identify(r *http.Request, now time.Time) (Session, bool) {
	c, err := r.Cookie(Cookie)
	if err != nil {
		return Session{}, false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 4 && len(parts) != 5 {
		return Session{}, false
	}
	var minter []byte
	var minterErr error
	if len(parts) == 5 {
		minter, minterErr = base64.RawURLEncoding.DecodeString(parts[4])
	}
	keyID, keyErr := base64.RawURLEncoding.DecodeString(parts[0])
	tenant, tenantErr := base64.RawURLEncoding.DecodeString(parts[1])
	unix, expErr := strconv.ParseInt(parts[2], 10, 64)
	got, macErr := base64.RawURLEncoding.DecodeString(parts[3])
	key, known := p.keys[string(keyID)]
	if keyErr != nil || tenantErr != nil || expErr != nil || macErr != nil || minterErr != nil || !known ||
		!hmac.Equal(got, sessionMAC(key, string(tenant), parts[2], string(minter))) || !now.Before(time.Unix(unix, 0)) {
		return Session{}, false
	}
	return Session{Tenant: string(tenant), Expires: time.Unix(unix, 0), Minter: string(minter), Value: c.Value, key: key}, true
}

// CSRF is the CSRF token of the forms served to session s.
func (s Session) CSRF() string {
	return base64.RawURLEncoding.EncodeToString(mac(s.key, "csrf", s.Value))
}

// CheckCSRF reports whether token, posted with a form in session s, is
// its CSRF token.
func (s Session) CheckCSRF(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(s.CSRF())) == 1
}

// linkMAC is a link's signature of tenant, expiry and minter; a link of
// no minter is signed as links were before they named one.
func linkMAC(key []byte, tenant, exp, minter string) []byte {
	if minter == "" {
		return mac(key, "link", tenant, exp)
	}
	return mac(key, "link", tenant, exp, minter)
}

// sessionMAC is a session's signature, as linkMAC.
func sessionMAC(key []byte, tenant, exp, minter string) []byte {
	if minter == "" {
		return mac(key, "session", tenant, exp)
	}
	return mac(key, "session", tenant, exp, minter)
}

// mac is the HMAC-SHA256 under key of parts, joined by NUL bytes so that
// no two lists of parts sign alike.
func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

// OverTLS reports whether r came over TLS, directly or, as a proxy says,
// to it: a cookie set in its answer is Secure.
func OverTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// ActorName is who the audit trail records an action through a portal
// link as: the tenant, and the link's minter when it names one
// ("tenant acme (link by alice)"), so an operator cannot act as a
// tenant unseen.
func ActorName(tenant, minter string) string {
	if minter == "" {
		return "tenant " + tenant
	}
	return fmt.Sprintf("tenant %s (link by %s)", tenant, minter)
}
