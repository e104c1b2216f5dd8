package destinations_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// TestTenantQuotasHoldThroughTheAPIAndTheCLI (issue 41, finding 2), with
// the real binary and the default quotas: a tenant creates 100 endpoints
// through the API and its 101st is refused with 422 naming
// destinations.quotas.endpoints_per_tenant and 100, by the API and by
// `outboxd destinations create`; it sends 10 test events within a minute
// and the 11th is refused with 429, a Retry-After of at most a minute and
// the key destinations.quotas.test_events_per_minute with 10, by the API
// and by `outboxd destinations test-event`. Another tenant creates an
// endpoint and sends a test event meanwhile.
//
// Mutations, each failing this test: Store.Create without checkEndpoints
// (the 101st is created, 201); SendTestEvent without checkTestEvents (the
// 11th is accepted, 202).
func TestTenantQuotasHoldThroughTheAPIAndTheCLI(t *testing.T) {
	t.Parallel()
	o := serve(t, setup{})
	rcv := newReceiver(t)
	var first destinations.Created
	for i := range destinations.DefaultEndpointsPerTenant {
		var c destinations.Created
		o.call(t, http.MethodPost, "/v1/tenants/noisy/destinations", map[string]any{"url": fmt.Sprintf("%s/noisy/%d", rcv.URL, i)}, &c)
		if i == 0 {
			first = c
		}
	}
	endpoints := fmt.Sprintf("%s: %d", destinations.KeyEndpointsPerTenant, destinations.DefaultEndpointsPerTenant)
	if status, _, body := o.post(t, "/v1/tenants/noisy/destinations", `{"url":"`+rcv.URL+`/noisy/101"}`); status != http.StatusUnprocessableEntity || !strings.Contains(body, endpoints) {
		t.Errorf("the 101st endpoint: %d %s; want 422 naming %q", status, body, endpoints)
	}
	r, err := proc.Run(t.Context(), binary, o.env, nil, "--config", o.config, "destinations", "create", "--tenant", "noisy", "--url", rcv.URL+"/noisy/cli")
	if err != nil || r.Code == 0 || !strings.Contains(r.Stderr, endpoints) {
		t.Errorf("destinations create past the quota: %v, exit %d, %s; want a refusal naming %q", err, r.Code, r.Stderr, endpoints)
	}
	quiet := o.create(t, rcv, "quiet")

	testEvent := "/v1/tenants/noisy/destinations/" + first.ID + "/test-event"
	for i := range destinations.DefaultTestEventsPerMinute {
		if status, _, body := o.post(t, testEvent, ""); status != http.StatusAccepted {
			t.Fatalf("test event %d: %d %s; want 202", i+1, status, body)
		}
	}
	events := fmt.Sprintf("%s: %d", destinations.KeyTestEventsPerMinute, destinations.DefaultTestEventsPerMinute)
	status, header, body := o.post(t, testEvent, "")
	wait, _ := strconv.Atoi(header.Get("Retry-After"))
	if status != http.StatusTooManyRequests || !strings.Contains(body, events) || wait < 1 || time.Duration(wait)*time.Second > time.Minute {
		t.Errorf("the 11th test event: %d, Retry-After %q, %s; want 429 naming %q, retry within a minute", status, header.Get("Retry-After"), body, events)
	}
	r, err = proc.Run(t.Context(), binary, o.env, nil, "--config", o.config, "destinations", "test-event", first.ID, "--tenant", "noisy")
	if err != nil || r.Code == 0 || !strings.Contains(r.Stderr, events) {
		t.Errorf("destinations test-event past the quota: %v, exit %d, %s; want a refusal naming %q", err, r.Code, r.Stderr, events)
	}
	if status, _, body := o.post(t, "/v1/tenants/quiet/destinations/"+quiet.ID+"/test-event", ""); status != http.StatusAccepted {
		t.Errorf("the quiet tenant's test event: %d %s; want 202", status, body)
	}
}

// post sends body (JSON, or nothing) to the API and returns the answer's
// status, headers and body, whatever the status.
func (o *outbox) post(t *testing.T, path, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, o.api+path, bytes.NewReader([]byte(body)))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}
