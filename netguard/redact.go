package netguard

import (
	"context"
	"net/http"
	"net/url"
)

// RedactedURLPart replaces the parts of a request URL that spans do not
// record: webhook URLs often carry their credential in the path (Slack's
// incoming webhooks) or the query (?token=...).
const RedactedURLPart = "REDACTED"

// RedactURL returns the URL a span records for u: scheme and host always,
// the path only when keepPath is set (otherwise /REDACTED), every query
// value replaced by REDACTED, and never user info or a fragment.
func RedactURL(u *url.URL, keepPath bool) *url.URL {
	r := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if !keepPath && u.Path != "" && u.Path != "/" {
		r.Path, r.RawPath = "/"+RedactedURLPart, ""
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{RedactedURLPart}
		}
		r.RawQuery = q.Encode()
	}
	return r
}

// realURLKey carries a request's real URL in its context, from
// redactURLTransport to restoreURLTransport.
type realURLKey struct{}

// redactURLTransport sits above otelhttp, which records the URL it is
// handed as url.full on the client span: it hands otelhttp a copy of the
// request whose URL is redacted, with the real one in the context.
type redactURLTransport struct {
	next     http.RoundTripper
	keepPath bool
}

func (t redactURLTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(context.WithValue(req.Context(), realURLKey{}, req.URL))
	r.URL = RedactURL(req.URL, t.keepPath)
	resp, err := t.next.RoundTrip(r)
	if resp != nil {
		resp.Request = req
	}
	return resp, err
}

// restoreURLTransport sits below otelhttp and puts the real URL back, so
// the request goes where it was meant to.
type restoreURLTransport struct{ next http.RoundTripper }

func (t restoreURLTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if u, ok := req.Context().Value(realURLKey{}).(*url.URL); ok {
		req = req.Clone(req.Context())
		req.URL = u
	}
	return t.next.RoundTrip(req)
}
