package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// GET /v1/openapi.json is public documentation, served without a token;
// everything else below /v1 stays behind the token, and a path the API
// does not have answers 404 with the API's JSON error, the Error schema
// openapi.json declares, not the mux's plain text.
// (Mutations, each failing this test: the document's route back among
// apiRoutes with the read role, 401 without a token; no fallback route
// on the /v1 mux, "404 page not found" in text/plain.)
func TestOpenAPIDocumentIsPublicAndUnknownPathsAnswerJSON(t *testing.T) {
	t.Parallel()
	doc, _ := openAPISpec(t)
	a := newOperatorAPI(t, operatorConfig)
	resp, raw := a.send(t, http.MethodGet, openAPIPath, "", "")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(raw, openAPIDocument) {
		t.Errorf("GET %s without a token: %d, want 200 and the document", openAPIPath, resp.StatusCode)
	}
	if status := a.do(t, http.MethodPost, openAPIPath, "", "", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", openAPIPath, status)
	}
	errorSchema := doc.Components.Schemas["Error"]
	if errorSchema == nil {
		t.Fatal("openapi.json declares no Error schema")
	}
	for _, c := range []struct {
		method, path, token string
		status              int
	}{
		{http.MethodGet, "/v1/nope", operatorToken, http.StatusNotFound},
		{http.MethodGet, "/v1/", operatorToken, http.StatusNotFound},
		{http.MethodPost, "/v1/sinks/partner/pauses", operatorToken, http.StatusNotFound},
		{http.MethodGet, "/v1/messages/1/attempts", operatorToken, http.StatusNotFound},
		{http.MethodGet, "/v1/nope", "", http.StatusUnauthorized},
		{http.MethodGet, "/v1/stats", "", http.StatusUnauthorized},
	} {
		resp, raw := a.send(t, c.method, c.path, c.token, "")
		var body any
		err := json.Unmarshal(raw, &body)
		if err == nil {
			err = errorSchema.Value.VisitJSON(body)
		}
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || err != nil {
			t.Errorf("%s %s (token %v): %d %s %q (%v), want %d with the API's JSON error", c.method, c.path, c.token != "", resp.StatusCode, resp.Header.Get("Content-Type"), raw, err, c.status)
		}
	}
}
