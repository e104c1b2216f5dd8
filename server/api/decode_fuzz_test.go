package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/config"
)

// FuzzDecodeMessageRequest: any body yields either a request with every
// required field set and a configured sink, or a 400/413/422 with a message.
// (Mutation: answering a missing dedup_key without a status fails this
// target on its seeds.)
func FuzzDecodeMessageRequest(f *testing.F) {
	for _, seed := range []string{
		`{"sink":"audit","dedup_key":"k","payload":{"a":1},"ordering_key":"o"}`,
		`{"sink":"audit","dedup_key":"k","payload":null}`,
		`{"sink":"nope","dedup_key":"k","payload":1}`,
		`{"sink":"audit","dedup_key":7}`,
		`{"sink":"audit","dedup_key":"k","payload":1} trailing`,
		`[]`, ``, `{"colour":1}`,
		// Each required field missing once.
		`{"dedup_key":"k","payload":1}`, `{"sink":"audit","payload":1}`, `{"sink":"audit","dedup_key":"k"}`,
	} {
		f.Add(seed)
	}
	cfg := &config.Config{Sinks: map[string]config.SinkSpec{"audit": {Type: "discard"}}}
	f.Fuzz(func(t *testing.T, body string) {
		req, status, err := decodeMessageRequest(strings.NewReader(body), cfg)
		if err != nil {
			if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity && status != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d for %v", status, err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if req.Sink != "audit" || req.DedupKey == "" || len(req.Payload) == 0 {
			t.Fatalf("accepted an incomplete request %+v", req)
		}
	})
}
