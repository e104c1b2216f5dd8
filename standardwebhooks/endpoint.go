package standardwebhooks

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// Endpoint is one receiver of Standard Webhooks: where to POST, the
// secrets that sign each request (one signature each; none sends
// unsigned) and extra static headers. The webhook sink has one; the
// destinations sink one per destination.
type Endpoint struct {
	URL     string
	Secrets []Secret
	Headers http.Header
}

// CheckURL reports whether raw can be an endpoint's URL: http or https,
// with a host. Its errors never repeat the URL, which may carry a token.
func CheckURL(raw string) error {
	if raw == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL itself
		}
		return fmt.Errorf("not a valid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("has no host")
	}
	return nil
}
