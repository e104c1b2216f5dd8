package netguard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outboxd/outboxd/netguard"
)

// TestHTTPClientSpansRedactURL: a Slack-style incoming-webhook URL (the
// secret is the path) and a token in the query reach the server intact but
// appear in no span attribute, event or name; with TraceURLPath the path is
// recorded and query values still are not. (Mutation: redactURLTransport
// handing otelhttp the real URL fails this test.)
func TestHTTPClientSpansRedactURL(t *testing.T) {
	t.Parallel()
	const pathSecret, querySecret = "T0PSECRET/B1SECRET/xoxSECRETPATH", "qSECRETtoken"
	var gotPath, gotQuery string
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.Path, r.URL.Query().Get("token")
		w.WriteHeader(http.StatusNoContent)
	})
	for _, keepPath := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		client := netguard.NewHTTPClient(netguard.HTTPClientOptions{AllowPrivate: true, TracerProvider: tp, TraceURLPath: keepPath})
		target := srv.URL + "/services/" + pathSecret + "?token=" + querySecret
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, target, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		netguard.DiscardBody(resp.Body)
		if resp.Request.URL.String() != target {
			t.Errorf("resp.Request.URL = %s, want the caller's URL", resp.Request.URL)
		}
		if gotPath != "/services/"+pathSecret || gotQuery != querySecret {
			t.Errorf("server got path %q token %q, want the real ones", gotPath, gotQuery)
		}
		spans := rec.Ended()
		if len(spans) == 0 {
			t.Fatal("no span recorded")
		}
		var fullURL string
		for _, s := range spans {
			text := s.Name()
			for _, a := range s.Attributes() {
				text += " " + string(a.Key) + "=" + a.Value.String()
				if a.Key == "url.full" {
					fullURL = a.Value.AsString()
				}
			}
			for _, e := range s.Events() {
				for _, a := range e.Attributes {
					text += " " + a.Value.String()
				}
			}
			if strings.Contains(text, querySecret) || (!keepPath && strings.Contains(text, "SECRET")) {
				t.Errorf("keepPath=%v: span leaks a secret: %s", keepPath, text)
			}
		}
		u, err := url.Parse(fullURL)
		if err != nil || u.Query().Get("token") != netguard.RedactedURLPart {
			t.Errorf("keepPath=%v: url.full = %q, want the token redacted", keepPath, fullURL)
		}
		if keepPath != strings.Contains(fullURL, pathSecret) {
			t.Errorf("keepPath=%v: url.full = %q", keepPath, fullURL)
		}
	}
}

func ExampleRedactURL() {
	u, _ := url.Parse("https://hooks.slack.com/services/T0/B0/secret?token=abc")
	fmt.Println(netguard.RedactURL(u, false))
	fmt.Println(netguard.RedactURL(u, true))
	// Output:
	// https://hooks.slack.com/REDACTED?token=REDACTED
	// https://hooks.slack.com/services/T0/B0/secret?token=REDACTED
}
