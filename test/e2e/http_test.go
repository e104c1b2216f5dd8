package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const apiToken = "e2e-api-token-0123456789"

// call makes one API request, with a JSON body, and returns the status and
// decoded body. header are name, value pairs that are set last.
func call(t *testing.T, method, url, token, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1] // the client sends req.Host, not a Host header
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var decoded map[string]any
	_ = json.Unmarshal(raw, &decoded)
	if strings.Contains(string(raw), "goroutine ") || strings.Contains(string(raw), ".go:") {
		t.Errorf("%s %s answered with internals: %s", method, url, raw)
	}
	return resp.StatusCode, decoded
}

// TestHTTPAPI covers authentication, every endpoint's status codes, field
// naming in errors, body limits and trace continuation.
func TestHTTPAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "  token: "+apiToken)
	e.mustRun("migrate")
	srv := e.serve()
	msgs := srv.url("/v1/messages")

	for _, tok := range []string{"", "wrong-token", apiToken + "x"} {
		if code, body := call(t, "POST", msgs, tok, `{"sink":"audit","dedup_key":"a","payload":1}`); code != 401 || body["error"] == nil {
			t.Errorf("token %q: %d %v, want 401 with an error", tok, code, body)
		}
	}
	for _, path := range []string{"/v1/stats", "/v1/dlq"} {
		if code, _ := call(t, "GET", srv.url(path), "", ""); code != 401 {
			t.Errorf("GET %s without a token: %d, want 401", path, code)
		}
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	code, body := call(t, "POST", msgs, apiToken, `{"sink":"audit","dedup_key":"m-1","payload":{"a":1},"ordering_key":"o"}`,
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if code != 201 || body["created"] != true || body["id"] == nil {
		t.Fatalf("first POST: %d %v", code, body)
	}
	id := body["id"]
	if code, body := call(t, "POST", msgs, apiToken, `{"sink":"audit","dedup_key":"m-1","payload":{"a":2}}`); code != 200 || body["created"] != false || body["id"] != id {
		t.Fatalf("duplicate POST: %d %v", code, body)
	}
	var stored string
	if err := e.pool.QueryRow(context.Background(), "SELECT headers->>'traceparent' FROM "+e.schema+".messages_all WHERE dedup_key = 'm-1'").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored, traceID) {
		t.Errorf("stored traceparent %q does not continue trace %s", stored, traceID)
	}

	bad := []struct {
		body  string
		code  int
		field string
	}{
		{`{"sink":"audit","dedup_key":"x"`, 400, "JSON"},
		{``, 400, "empty"},
		{`{"sink":"audit","dedup_key":"x","payload":1,"colour":"red"}`, 400, "colour"},
		{`{"sink":"audit","dedup_key":7,"payload":1}`, 400, "dedup_key"},
		{`{"sink":"audit","dedup_key":"x","payload":1} {}`, 400, "trailing"},
		{`{"dedup_key":"x","payload":1}`, 422, "sink"},
		{`{"sink":"nope","dedup_key":"x","payload":1}`, 422, "sink"},
		{`{"sink":"audit","payload":1}`, 422, "dedup_key"},
		{`{"sink":"audit","dedup_key":"x"}`, 422, "payload"},
		{`{"sink":"audit","dedup_key":"` + strings.Repeat("k", 300) + `","payload":1}`, 422, "dedup key"},
		{`{"sink":"audit","dedup_key":"x","payload":"` + strings.Repeat("p", 2<<20) + `"}`, 413, "limit"},
	}
	for _, b := range bad {
		code, body := call(t, "POST", msgs, apiToken, b.body)
		msg, _ := body["error"].(string)
		if code != b.code || !strings.Contains(msg, b.field) {
			t.Errorf("POST %.60s: %d %q, want %d naming %q", b.body, code, msg, b.code, b.field)
		}
	}

	code, body = call(t, "GET", srv.url("/v1/stats"), apiToken, "")
	if sinks, _ := body["sinks"].(map[string]any); code != 200 || sinks["audit"] == nil {
		t.Errorf("GET /v1/stats: %d %v", code, body)
	}
	req, _ := http.NewRequest("GET", srv.url("/v1/dlq?sink=audit"), nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(raw)) != "[]" {
		t.Errorf("GET /v1/dlq: %d %s", resp.StatusCode, raw)
	}
	if code, _ := call(t, "GET", srv.url("/v1/dlq?limit=x"), apiToken, ""); code != 400 {
		t.Errorf("GET /v1/dlq?limit=x: %d, want 400", code)
	}
	if code, body := call(t, "POST", srv.url("/v1/dlq/redrive"), apiToken, `{"ids":[123456]}`); code != 200 || body["redriven"] != float64(0) {
		t.Errorf("redrive: %d %v", code, body)
	}
	if code, _ := call(t, "POST", srv.url("/v1/dlq/redrive"), apiToken, `{}`); code != 422 {
		t.Errorf("empty redrive: %d, want 422", code)
	}

	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		if code, _ := call(t, "GET", srv.url(path), "", ""); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
	resp, err = http.Get(srv.url("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(metrics), "go_goroutines") {
		t.Errorf("GET /metrics: %d\n%.300s", resp.StatusCode, metrics)
	}
	if strings.Contains(srv.Logs(), apiToken) {
		t.Errorf("the server logged the API token")
	}
}

// TestServeRefusesPublicListenWithoutToken: exposing the API beyond the
// host needs a token.
func TestServeRefusesPublicListenWithoutToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "")
	e.extra = []string{"OUTBOXD_HTTP_LISTEN=0.0.0.0:0"}
	_, stderr, code := e.run(nil, "serve")
	if code != 2 || !strings.Contains(stderr, "http.token") {
		t.Fatalf("serve on 0.0.0.0 without a token: exit %d, %s", code, stderr)
	}
}

// TestReadyzBeforeMigration: serve starts, answers /healthz, fails /readyz
// and logs why until the schema is migrated, then becomes ready.
func TestReadyzBeforeMigration(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "")
	srv := e.serve()
	if code, _ := call(t, "GET", srv.url("/healthz"), "", ""); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	code, body := call(t, "GET", srv.url("/readyz"), "", "")
	if msg, _ := body["error"].(string); code != 503 || !strings.Contains(msg, "outboxd migrate") {
		t.Errorf("/readyz before migrate: %d %v", code, body)
	}
	eventually(t, 10*time.Second, "a log line saying serve waits for the database", func() bool {
		return strings.Contains(srv.Logs(), "waiting for the database")
	})
	e.mustRun("migrate")
	eventually(t, 30*time.Second, "/readyz to pass after migrate", func() bool {
		code, _ := call(t, "GET", srv.url("/readyz"), "", "")
		return code == 200
	})
}
