package secrets_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// TestDestinationSecretsNeverLeak: the signing secrets of tenants'
// destinations (made by the API and the CLI, rotated by both) and
// OUTBOXD_SECRETS_KEY (its whole value and its key's bytes) appear only
// in the answers of create and rotate-secret: in no line serve logs while
// it delivers to them (signed deliveries, one endpoint failing every
// attempt), and in no other answer of the API (list, get, update,
// disable, enable, deliveries, enqueue, publish, stats, portal) or the
// CLI (list, get, update, disable, enable, enqueue, publish, stats, dlq
// list, config show and check), nor in the recorded delivery errors.
//
// Mutations, each failing this test: POST .../rotate-secret logging the
// new secret (serve's log); webhook.Post wrapping a refusal with the
// base64 of the first secret it signed with (the recorded errors, dlq
// list).
func TestDestinationSecretsNeverLeak(t *testing.T) {
	dir := t.TempDir()
	bin, err := proc.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	schema := "secrets_dst_" + strings.ToLower(rand.Text()[:10])
	pool := testdb.Pool(t, 2)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	key, err := destinations.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"OUTBOXD_SECRETS_KEY":     key,
		"the secrets key's bytes": strings.TrimPrefix(key, "k1:"),
	}

	var col collector
	var signed atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("webhook-signature") != "" {
			signed.Add(1)
		}
		if strings.HasPrefix(r.URL.Path, "/down") {
			w.WriteHeader(http.StatusInternalServerError) // failures make the relay log and record errors
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	const token = "dst-secrets-token"
	config := filepath.Join(dir, "plugins.yaml")
	writeFile(t, config, fmt.Sprintf(`database: {url: %q, schema: %s}
relay: {lease: 3s, poll_interval: 100ms}
http: {listen: 127.0.0.1:0, token: %s}
sinks:
  customers: {type: destinations, max_attempts: 2, backoff: {initial: 50ms, max: 100ms}, options: {allow_private: true, timeout: 1s}}
routes:
  billing:
    events: ["order.*"]
    to:
      - {sink: customers, tenant: "{{.data.account_id}}"}
`, testdb.URL(), schema, token))
	env := proc.Environ(destinations.EnvSecretsKey + "=" + key)
	// run runs the CLI; its output is collected unless it is a secret's
	// one answer.
	run := func(collect bool, args ...string) proc.Result {
		t.Helper()
		res, err := proc.Run(t.Context(), bin, env, nil, append([]string{"--config", config}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if collect {
			col.add(fmt.Sprintf("outboxd %s (exit %d) stdout", strings.Join(args[:min(2, len(args))], " "), res.Code), []byte(res.Stdout))
			col.add(fmt.Sprintf("outboxd %s stderr", strings.Join(args[:min(2, len(args))], " ")), []byte(res.Stderr))
		}
		return res
	}
	if res := run(true, "migrate"); res.Code != 0 {
		t.Fatalf("migrate: %+v", res)
	}
	srv := proc.Serve(t, bin, config, env)
	base := "http://" + srv.Addr()
	api := func(collect bool, method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		if collect {
			col.add(fmt.Sprintf("api %s %s -> %d", method, path, resp.StatusCode), b)
		}
		return b
	}
	secretOf := func(what string, answer []byte) string {
		t.Helper()
		var v struct{ ID, Secret string }
		if err := json.Unmarshal(answer, &v); err != nil || !strings.HasPrefix(v.Secret, "whsec_") {
			t.Fatalf("%s: no secret in %s (%v)", what, answer, err)
		}
		secrets[what] = v.Secret
		secrets[what+" (its bytes)"] = strings.TrimPrefix(v.Secret, "whsec_")
		return v.ID
	}

	// acme's endpoint works, globex's fails every attempt.
	acme := secretOf("acme's secret", api(false, "POST", "/v1/tenants/acme/destinations", fmt.Sprintf(`{"url": "%s/up"}`, receiver.URL)))
	res := run(false, "destinations", "create", "--tenant", "globex", "--url", receiver.URL+"/down", "-o", "json")
	globex := secretOf("globex's secret", []byte(res.Stdout))
	secretOf("acme's rotated secret", api(false, "POST", "/v1/tenants/acme/destinations/"+acme+"/rotate-secret", `{"overlap": "1h"}`))
	res = run(false, "destinations", "rotate-secret", globex, "--tenant", "globex", "--overlap", "1h", "-o", "json")
	var rotated struct{ Secret string }
	if err := json.Unmarshal([]byte(res.Stdout), &rotated); err != nil || !strings.HasPrefix(rotated.Secret, "whsec_") {
		t.Fatalf("rotate-secret: %+v", res)
	}
	secrets["globex's rotated secret"], secrets["globex's rotated secret (its bytes)"] = rotated.Secret, strings.TrimPrefix(rotated.Secret, "whsec_")

	for _, tenant := range []string{"acme", "globex"} {
		api(true, "POST", "/v1/events", fmt.Sprintf(`{"type": "order.created", "key": "http-%s", "data": {"account_id": %q}}`, tenant, tenant))
		run(true, "publish", "--type", "order.paid", "--key", "cli-"+tenant, "--data", fmt.Sprintf(`{"account_id": %q}`, tenant))
	}
	api(true, "POST", "/v1/messages", fmt.Sprintf(`{"sink": "customers", "destination": %q, "dedup_key": "welcome-api", "payload": {"hello": 1}}`, acme))
	run(true, "enqueue", "--sink", "customers", "--destination", globex, "--key", "welcome-cli", "--text", "hello")
	testrelay.WaitFor(t, time.Minute, "every destination row to be sent or dead", func() bool {
		var open, total int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE status NOT IN ('sent', 'dead')), count(*) FROM `+schema+`.messages_all
			WHERE headers ? 'outboxd-destination'`).Scan(&open, &total)
		return err == nil && open == 0 && total == 6
	})
	if signed.Load() < 3 {
		t.Errorf("the receiver got %d signed requests; the secrets were not used", signed.Load())
	}

	for _, d := range []struct{ tenant, id string }{{"acme", acme}, {"globex", globex}} {
		one := "/v1/tenants/" + d.tenant + "/destinations/" + d.id
		api(true, "GET", "/v1/tenants/"+d.tenant+"/destinations", "")
		api(true, "GET", one, "")
		api(true, "PATCH", one, `{"description": "changed"}`)
		api(true, "POST", one+"/disable", `{"reason": "checking"}`)
		api(true, "POST", one+"/enable", "")
		api(true, "GET", one+"/deliveries", "")
		run(true, "destinations", "list", "--tenant", d.tenant, "-o", "json")
		run(true, "destinations", "get", d.id, "--tenant", d.tenant, "-o", "json")
		run(true, "destinations", "update", d.id, "--tenant", d.tenant, "--description", "changed again", "-o", "json")
		run(true, "destinations", "disable", d.id, "--tenant", d.tenant, "-o", "json")
		run(true, "destinations", "enable", d.id, "--tenant", d.tenant, "-o", "json")
	}
	api(true, "POST", "/v1/tenants/acme/portal", `{"expires_in": "10m"}`)
	api(true, "GET", "/v1/stats", "")
	run(true, "stats")
	run(true, "dlq", "list", "-o", "json")
	run(true, "config", "show")
	run(true, "config", "check")
	if err := srv.Stop(); err != nil {
		t.Errorf("serve stop: %v", err)
	}
	logs := srv.Logs()
	col.add("serve logs", []byte(logs))
	if !strings.Contains(logs, "customers") {
		t.Errorf("serve logged nothing of the customers sink; the log check proves little:\n%s", logs)
	}
	var recorded string
	if err := pool.QueryRow(t.Context(), `SELECT coalesce(string_agg(coalesce(m.last_error, ''), E'\n'), '') || E'\n' ||
		coalesce((SELECT string_agg(error, E'\n') FROM `+schema+`.failed_attempts), '') FROM `+schema+`.messages_all m`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	col.add("recorded delivery errors", []byte(recorded))
	if !strings.Contains(recorded, "500") {
		t.Errorf("no delivery to globex's endpoint failed with its 500; the error check proves nothing:\n%s", recorded)
	}

	all := col.String()
	refuseSecrets(t, all, secrets, "outboxd-destination-secrets-output.txt")
}
