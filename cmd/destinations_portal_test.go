package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/api"
	"github.com/outboxd/outboxd/server/console"
	"github.com/outboxd/outboxd/server/portal"
)

// portalKey is a fixed key in destinations.EnvSecretsKey's form.
const portalKey = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// runPortal runs `outboxd destinations portal args...` with env, on the
// outbox of config (which records the link in its audit trail).
func runPortal(config string, env map[string]string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := execute(context.Background(), append([]string{"--config", config, "destinations", "portal"}, args...),
		streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	return code, out.String(), errOut.String()
}

// TestDestinationsPortalPrintsALinkServeOpens: `destinations portal`
// signs a link below --base-url that a console holding the same
// OUTBOXD_SECRETS_KEY opens, lasting --expires-in; without the key, with
// a lifetime over the maximum or a base URL that is not one it exits 2
// saying why. The link is recorded in the audit trail, with who minted
// it, for which tenant and until when.
// (Mutations, each failing this test: the command signing with a key of
// its own instead of the keyring's; --expires-in ignored; the lifetime
// check left out; not calling RecordPortalLink.)
func TestDestinationsPortalPrintsALinkServeOpens(t *testing.T) {
	t.Parallel()
	pool, tob := testdb.New(t)
	config := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("database: {url: %q, schema: %s}\n", testdb.URL(), tob.Schema())), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{destinations.EnvSecretsKey: portalKey, "USER": "alice"}
	before := time.Now()
	code, out, errOut := runPortal(config, env, "--tenant", "acme", "--base-url", "https://outboxd.example.com", "--expires-in", "15m", "-o", "json")
	var link api.PortalLink
	if err := json.Unmarshal([]byte(out), &link); code != exitOK || err != nil || !strings.HasPrefix(link.URL, "https://outboxd.example.com"+portal.OpenPath+"?") {
		t.Fatalf("exit %d, stdout %q, stderr %q (%v)", code, out, errOut, err)
	}
	if lasts := link.ExpiresAt.Sub(before); lasts < 15*time.Minute-2*time.Second || lasts > 15*time.Minute+2*time.Second {
		t.Errorf("a link of --expires-in 15m lasts %s", lasts)
	}
	entries, err := tob.Audit().List(t.Context(), pool, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("the audit trail is empty, want the portal_link")
	}
	if entries[0].Action != audit.ActionPortalLink || !strings.HasPrefix(entries[0].Actor, "alice@") ||
		!strings.Contains(string(entries[0].Filter), `"acme"`) || !strings.Contains(string(entries[0].Detail), link.ExpiresAt.UTC().Format(time.RFC3339)) {
		t.Errorf("audit trail's newest entry %+v (%s, %s), want alice's portal_link for acme until %s", entries[0], entries[0].Filter, entries[0].Detail, link.ExpiresAt)
	}

	ring, err := destinations.ParseKeyring(portalKey)
	if err != nil {
		t.Fatal(err)
	}
	links, err := portal.NewLinks(ring)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outboxd.New(nil, outboxd.Options{Schema: "outbox"})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := console.New(console.Options{Destinations: ob.Destinations(ring), Portal: links, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer ui.Close()
	srv := httptest.NewServer(ui)
	defer srv.Close()
	resp, err := http.Get(srv.URL + strings.TrimPrefix(link.URL, "https://outboxd.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a console with the same key opens the command's link: %d, want 200", resp.StatusCode)
	}

	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
		says string
	}{
		"no key":      {nil, []string{"--tenant", "acme"}, destinations.EnvSecretsKey},
		"too long":    {env, []string{"--tenant", "acme", "--expires-in", "48h"}, "at most 24h"},
		"no tenant":   {env, nil, "tenant is empty"},
		"not a URL":   {env, []string{"--tenant", "acme", "--base-url", "outboxd.example.com"}, "--base-url"},
		"with a path": {env, []string{"--tenant", "acme", "--base-url", "https://outboxd.example.com/portal"}, "--base-url"},
	} {
		if code, out, errOut := runPortal(config, tc.env, tc.args...); code != exitConfig || out != "" || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d saying %q", name, code, out, errOut, exitConfig, tc.says)
		}
	}
}
