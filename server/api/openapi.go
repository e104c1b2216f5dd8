package api

import (
	_ "embed"
	"net/http"
)

// openAPIPath is where the API serves its OpenAPI 3.1 description.
const openAPIPath = "/v1/openapi.json"

// openAPIDocument is the OpenAPI 3.1 description of the HTTP API, served at
// openAPIPath. TestOpenAPIDescribesEveryEndpoint checks that it describes
// every endpoint and that live answers match it; the independent validator
// of TestOpenAPIDocumentIsValid checks the document itself.
//
//go:embed openapi.json
var openAPIDocument []byte

// serveOpenAPI answers GET /v1/openapi.json.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDocument)
}
