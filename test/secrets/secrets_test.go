// Package secrets_test runs the outboxd binary end to end with distinctive
// secret values in every place a secret can be configured and greps all of
// its output (logs, errors, command output, API answers, exported spans and
// the outbox's recorded errors) for each of them.
package secrets_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/pgcluster"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// collector gathers everything that left the binary.
type collector struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *collector) add(what string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(&c.out, "\n=== %s\n", what)
	c.out.Write(data)
}

func (c *collector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// TestSecretsNeverLeak: tokens, the webhook signing secret, a webhook URL's
// query token, user info (user:password@, and a token as the user name),
// header values (Authorization, X-Api-Key), a Slack incoming-webhook URL's
// secret path (under webhook_url, and as a webhook sink's plain url), an
// SMTP password and the database password appear in no log line, error,
// command output, API answer, metric, exported span or recorded delivery
// error of a full run of migrate, serve, enqueue, the HTTP API, stats, dlq
// list, config show and config check (of a valid and of a broken file).
// The Slack bot token is used for real, against the fake Slack: four
// messages meet a post whose answer is lost (the retry reads the channel's
// history), two refusals (invalid_auth, channel_not_found) and a plain
// post, in whatever order they arrive. A webhook to an address where
// nothing listens fails in the transport. (Mutations: the Slack sink's
// errors quoting its token fails this test; so does TransportError keeping
// the *url.Error, which quotes the URL and its query token.)
func TestSecretsNeverLeak(t *testing.T) {
	dir := t.TempDir()
	bin, err := proc.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	pg := pgcluster.Start(t)
	suffix := strings.ToUpper(rand.Text()[:10])
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	secrets := map[string]string{
		"http token":          "httptoken" + suffix,
		"webhook secret":      "whsec_" + base64.StdEncoding.EncodeToString(key),
		"webhook secret key":  base64.StdEncoding.EncodeToString(key),
		"webhook query token": "hookquery" + suffix,
		"slack webhook path":  "SLACKPATH" + suffix,
		"slack bot token":     fakeslack.Token, // the one token the fake Slack accepts
		"smtp password":       "smtppass" + suffix,
		"database password":   "dbpass" + suffix,
		"header bearer token": "hdrbearer" + suffix,
		"header api key":      "hdrapikey" + suffix,
		"url password":        "urlpass" + suffix,
		"url user token":      "urlusertoken" + suffix,
		"slack-shaped path":   "SLACKSHAPED" + suffix,
		"unreachable token":   "downquery" + suffix,
	}

	var col collector
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError) // failures make the relay log and record errors
	}))
	t.Cleanup(receiver.Close)
	slack := fakeslack.New()
	t.Cleanup(slack.Close)
	slack.Inject(fakeslack.MethodPostMessage,
		fakeslack.Fault{Status: http.StatusInternalServerError, Accept: true}, // posted, the answer lost
		fakeslack.Fault{Error: "invalid_auth"},
		fakeslack.Fault{Error: "channel_not_found"})
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		col.add("otlp "+r.URL.Path, body) // protobuf keeps strings as plain bytes
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(otlp.Close)

	dbURL := strings.Replace(pg.URL(), "postgres@", "postgres:"+secrets["database password"]+"@", 1)
	config := filepath.Join(dir, "plugins.yaml")
	writeFile(t, config, `database: {url: "${DB_URL}", schema: secrets}
relay: {lease: 3s, poll_interval: 100ms}
http: {listen: 127.0.0.1:0, token: "${API_TOKEN}"}
sinks:
`+failingSink("hook", "webhook", fmt.Sprintf(`{url: "%s/hook?token=%s", secret: "${HOOK_SECRET}", allow_private: true, timeout: 1s, `+
		`headers: {Authorization: "Bearer %s", X-Api-Key: "%s"}}`,
		receiver.URL, secrets["webhook query token"], secrets["header bearer token"], secrets["header api key"]))+
		failingSink("hookuser", "webhook", fmt.Sprintf(`{url: "%s/hook", allow_private: true}`, withUser(receiver.URL, "ops:"+secrets["url password"])))+
		failingSink("hooktoken", "webhook", fmt.Sprintf(`{url: "%s/hook", allow_private: true}`, withUser(receiver.URL, secrets["url user token"])))+
		failingSink("hookslack", "webhook", fmt.Sprintf(`{url: "%s/services/T0/B0/%s", allow_private: true}`, receiver.URL, secrets["slack-shaped path"]))+
		failingSink("slackhook", "slack", fmt.Sprintf(`{webhook_url: "%s/services/T0/B0/%s"}`, receiver.URL, secrets["slack webhook path"]))+
		failingSink("slackbot", "slack", fmt.Sprintf(`{token: %q, channel: C0123, api_url: %q}`, secrets["slack bot token"], slack.APIURL()))+
		// Nothing listens there: the transport error must not quote the URL.
		failingSink("hookdown", "webhook", fmt.Sprintf(`{url: "http://127.0.0.1:1/hook?token=%s", allow_private: true, timeout: 1s}`, secrets["unreachable token"]))+
		failingSink("mail", "email", `{smtp: "127.0.0.1:1", tls: none, username: ops, password: "${SMTP_PASSWORD}", from: "o@example.com", to: ["ops@example.com"]}`))
	env := proc.Environ(
		"DB_URL="+dbURL, "API_TOKEN="+secrets["http token"], "HOOK_SECRET="+secrets["webhook secret"],
		"SMTP_PASSWORD="+secrets["smtp password"],
		"OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_COMPRESSION=none", "OTEL_BSP_SCHEDULE_DELAY=100",
	)
	run := func(args ...string) proc.Result {
		t.Helper()
		res, err := proc.Run(t.Context(), bin, env, nil, append([]string{"--config", config}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		label := args[len(args)-1] // the subcommand; the arguments may hold the test's own secrets
		col.add(fmt.Sprintf("outboxd ... %s (exit %d) stdout", label, res.Code), []byte(res.Stdout))
		col.add(fmt.Sprintf("outboxd ... %s stderr", label), []byte(res.Stderr))
		return res
	}

	if res := run("migrate"); res.Code != 0 {
		t.Fatalf("migrate: %+v", res)
	}
	srv := proc.Serve(t, bin, config, env)
	keys := map[string]string{"slackbot-1": "slackbot", "slackbot-2": "slackbot", "slackbot-3": "slackbot", "slackbot-4": "slackbot"}
	for _, sink := range []string{"hook", "hookuser", "hooktoken", "hookslack", "slackhook", "hookdown", "mail"} {
		keys["k-"+sink] = sink // dedup key -> sink
	}
	for key, sink := range keys {
		if res := run("enqueue", "--sink", sink, "--key", key, "--text", "hello"); res.Code != 0 {
			t.Errorf("enqueue to %s: %+v", sink, res)
		}
	}
	api := func(method, path, token, body string) {
		req, _ := http.NewRequest(method, "http://"+srv.Addr()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		col.add(fmt.Sprintf("api %s %s -> %d", method, path, resp.StatusCode), b)
	}
	api(http.MethodPost, "/v1/messages", secrets["http token"], `{"sink":"hook","dedup_key":"api-1","payload":{"a":1}}`)
	api(http.MethodPost, "/v1/messages", "wrong"+secrets["http token"], `{"sink":"hook","dedup_key":"api-2","payload":{"a":1}}`)
	api(http.MethodGet, "/v1/stats", secrets["http token"], "")

	// Let every message be delivered or run out of attempts: errors logged
	// and recorded. This polls the table: serve is another process.
	pool := pg.Pool(1)
	testrelay.WaitFor(t, time.Minute, "every message to be sent or dead", func() bool {
		var open int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE status NOT IN ('sent', 'dead')) + $1 - count(*) FROM secrets.messages_all`,
			len(keys)+1).Scan(&open) // +1: the API's message
		return err == nil && open == 0
	})
	if n := len(slack.Posts()); n < 2 {
		t.Errorf("the fake Slack holds %d posts, want the bot token used for at least 2", n)
	}
	if !slices.ContainsFunc(slack.Requests(), func(r fakeslack.Request) bool { return r.Method == fakeslack.MethodHistory }) {
		t.Error("the retry of the post whose answer was lost never read the channel history")
	}
	run("stats")
	run("dlq", "list")
	api(http.MethodGet, "/metrics", "", "")
	run("config", "show")
	run("config", "check")
	// A broken copy of the file: its problems are reported, its secrets not.
	broken := filepath.Join(dir, "broken.yaml")
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, broken, strings.Replace(string(data), "allow_private: true}", "allow_private: true, timeout: 5, colour: red}", 1)+"relais: {lease: 1s}\n")
	if res := run("--config", broken, "config", "check"); res.Code != 2 || !strings.Contains(res.Stderr, "timeout") {
		t.Errorf("config check of the broken file: %+v", res)
	}
	// A database that refuses the connection: the error must not quote the URL's password.
	bad := strings.Replace(dbURL, fmt.Sprintf(":%d/", pgPort(t, pg.URL())), ":1/", 1)
	run("--database-url", bad, "stats")
	if err := srv.Stop(); err != nil {
		t.Errorf("serve stop: %v", err)
	}
	col.add("serve logs", []byte(srv.Logs()))

	var recorded string
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(coalesce(last_error, ''), E'\n'), '') FROM secrets.messages_all`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	col.add("last_error column", []byte(recorded))
	var failed string
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(error, E'\n'), '') FROM secrets.failed_attempts`).Scan(&failed); err != nil {
		t.Fatal(err)
	}
	col.add("failed_attempts", []byte(failed))
	if !slices.ContainsFunc(strings.Split(failed, "\n"), func(line string) bool {
		return strings.Contains(line, `"hookdown"`) && strings.Contains(line, "connection refused")
	}) {
		t.Errorf("no delivery of hookdown failed in the transport; its URL check proves nothing:\n%s", failed)
	}

	all := col.String()
	if !strings.Contains(all, "otlp /v1/traces") || !strings.Contains(all, "send slackbot") {
		t.Errorf("no spans of the Slack bot sink were exported; the span check proves nothing")
	}
	refuseSecrets(t, all, secrets, "outboxd-secrets-output.txt")
}

// refuseSecrets fails t for every secret (by what it is) that appears in
// output as it is or URL-escaped, and then keeps output in a file named
// name in the temporary directory, for reading what leaked around it.
func refuseSecrets(t *testing.T, output string, secrets map[string]string, name string) {
	t.Helper()
	for what, secret := range secrets {
		for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			if i := strings.Index(output, form); i >= 0 {
				t.Errorf("the %s appears in the output: ...%s...", what, excerpt(output, i))
				break
			}
		}
	}
	if t.Failed() {
		path := filepath.Join(os.TempDir(), name)
		_ = os.WriteFile(path, []byte(output), 0o600)
		t.Logf("full output written to %s", path)
	}
}

// failingSink is an entry of the sinks block that gives up on a message
// after two quick attempts.
//
// max_deferrals: 1 lets a sink whose receiver looks down (hookdown's refused
// connection) have its last attempt spared once, not fifty times, so its
// row dies within the test's wait, before its breaker opens.
func failingSink(name, typ, options string) string {
	return fmt.Sprintf("  %s: {type: %s, max_attempts: 2, max_deferrals: 1, backoff: {initial: 50ms, max: 100ms}, options: %s}\n", name, typ, options)
}

// withUser returns base (http://host:port) with userinfo added.
func withUser(base, userinfo string) string {
	return strings.Replace(base, "://", "://"+userinfo+"@", 1)
}

func pgPort(t *testing.T, raw string) int {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var port int
	fmt.Sscan(u.Port(), &port)
	return port
}

func excerpt(s string, i int) string {
	return strings.ToValidUTF8(s[max(0, i-120):min(len(s), i+80)], "?")
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
