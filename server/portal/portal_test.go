package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/portal"
)

// A link names its minter under its signature: the session it opens
// carries the minter, and a link whose minter was changed or dropped, or
// a session cookie whose minter was swapped, is refused; the audit
// trail's actor through it names both. (Mutation: linkMAC and
// sessionMAC ignoring the minter fails this test: the altered links open
// and the swapped session is accepted.)
func TestLinksNameTheirMinter(t *testing.T) {
	t.Parallel()
	ring, err := destinations.ParseKeyring("k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	if err != nil {
		t.Fatal(err)
	}
	links, err := portal.NewLinks(ring)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	raw, _, err := links.Link("https://outboxd.example", "acme", "alice", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(raw)
	s, err := links.Open(u.Query(), now)
	if err != nil || s.Tenant != "acme" || s.Minter != "alice" {
		t.Fatalf("Open = %+v, %v; want acme's session minted by alice", s, err)
	}
	for name, alter := range map[string]func(url.Values){
		"another minter": func(q url.Values) { q.Set("by", "mallory") },
		"no minter":      func(q url.Values) { q.Del("by") },
	} {
		q := u.Query()
		alter(q)
		if _, err := links.Open(q, now); err == nil {
			t.Errorf("%s: the link opened, want refused", name)
		}
	}
	identify := func(value string) (portal.Session, bool) {
		r, _ := http.NewRequest(http.MethodGet, "https://outboxd.example/portal/", nil)
		r.AddCookie(&http.Cookie{Name: portal.Cookie, Value: value})
		return links.Identify(r, now)
	}
	if got, ok := identify(s.Value); !ok || got.Minter != "alice" {
		t.Errorf("Identify(the session) = %+v, %t; want alice's", got, ok)
	}
	parts := strings.Split(s.Value, ".")
	other := strings.Split(links.SessionValue("acme", "mallory", s.Expires), ".")
	if _, ok := identify(strings.Join(append(parts[:4:4], other[4]), ".")); ok {
		t.Error("a session whose minter was swapped is accepted")
	}
	if got := portal.ActorName("acme", "alice"); got != "tenant acme (link by alice)" {
		t.Errorf("ActorName = %q", got)
	}
}
