package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/api"
	"github.com/outboxd/outboxd/server/console"
	"github.com/outboxd/outboxd/server/portal"
)

// portalKey is a fixed key in destinations.EnvSecretsKey's form.
const portalKey = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// runPortal runs `outboxd destinations portal args...` with env.
func runPortal(env map[string]string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := execute(context.Background(), append([]string{"--config", "", "destinations", "portal"}, args...),
		streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	return code, out.String(), errOut.String()
}

// TestDestinationsPortalPrintsALinkServeOpens: `destinations portal`
// signs a link below --base-url that a console holding the same
// OUTBOXD_SECRETS_KEY opens, lasting --expires-in; without the key, with
// a lifetime over the maximum or a base URL that is not one it exits 2
// saying why.
// (Mutations, each failing this test: the command signing with a key of
// its own instead of the keyring's; --expires-in ignored; the lifetime
// check left out.)
func TestDestinationsPortalPrintsALinkServeOpens(t *testing.T) {
	t.Parallel()
	env := map[string]string{destinations.EnvSecretsKey: portalKey}
	before := time.Now()
	code, out, errOut := runPortal(env, "--tenant", "acme", "--base-url", "https://outboxd.example.com", "--expires-in", "15m", "-o", "json")
	var link api.PortalLink
	if err := json.Unmarshal([]byte(out), &link); code != exitOK || err != nil || !strings.HasPrefix(link.URL, "https://outboxd.example.com"+portal.OpenPath+"?") {
		t.Fatalf("exit %d, stdout %q, stderr %q (%v)", code, out, errOut, err)
	}
	if lasts := link.ExpiresAt.Sub(before); lasts < 15*time.Minute-2*time.Second || lasts > 15*time.Minute+2*time.Second {
		t.Errorf("a link of --expires-in 15m lasts %s", lasts)
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
		if code, out, errOut := runPortal(tc.env, tc.args...); code != exitConfig || out != "" || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d saying %q", name, code, out, errOut, exitConfig, tc.says)
		}
	}
}
