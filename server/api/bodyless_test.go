package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Calls without a body, as curl -X DELETE and generated clients send them
// (no Content-Type, nothing to read), reach every endpoint whose body is
// optional or absent; a body not declared JSON is still refused with 415,
// and a required body left out is a 400 saying so, not a 415. Every
// request and answer is checked against openapi.json.
// (Mutation: requireJSON checking the Content-Type of every request of a
// method that may change state, whatever its body, as before issue 43,
// fails this test: 415 for each bare call.)
func TestCallsWithoutABodyAreNotRefusedFor415(t *testing.T) {
	t.Parallel()
	_, router := openAPISpec(t)
	a := newPortalAPI(t, &bytes.Buffer{})
	c := &contract{t: t, a: a, router: router, covered: map[string]bool{}}
	const base = "/v1/tenants/acme/destinations"
	var created struct{ ID string }
	if err := json.Unmarshal(c.do(exchange{method: "POST", path: base, body: `{"url":"https://hooks.acme.example/outboxd"}`, status: 201}), &created); err != nil {
		t.Fatal(err)
	}
	one := base + "/" + created.ID
	for _, e := range []exchange{
		{method: "POST", path: "/v1/sinks/ghost/pause", body: `{"force":true}`, status: 200},
		{method: "DELETE", path: "/v1/sinks/ghost/pause", bare: true, status: 200},
		{method: "POST", path: one + "/disable", bare: true, status: 200},
		{method: "POST", path: one + "/enable", bare: true, status: 200},
		{method: "POST", path: one + "/rotate-secret", bare: true, status: 200},
		{method: "POST", path: "/v1/tenants/acme/portal", bare: true, status: 200},
		// A body is there, its type is not declared: 415.
		{method: "POST", path: "/v1/tenants/acme/portal", body: `{"expires_in":"30m"}`, bare: true, status: 415, invalid: true},
		// A required body left out: 400, naming what is missing.
		{method: "POST", path: "/v1/messages", bare: true, status: 400, invalid: true},
		{method: "DELETE", path: one + "?dry_run=true", bare: true, status: 200},
		{method: "POST", path: one + "/test-event", bare: true, status: 202},
	} {
		c.do(e)
	}
}
