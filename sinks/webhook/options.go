package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// DefaultTimeout bounds one webhook request when the timeout option is not
// set. The relay's delivery deadline bounds it too.
const DefaultTimeout = 10 * time.Second

// reservedHeaders are set by the sink itself; the headers option may not
// override them, or signatures and bodies would no longer match.
var reservedHeaders = []string{
	standardwebhooks.HeaderID, standardwebhooks.HeaderTimestamp, standardwebhooks.HeaderSignature,
	"Content-Type", "Content-Length", "Host", "Transfer-Encoding",
}

// Options are the webhook sink's options, as written in plugins.yaml; each
// is declared here once (see package confschema).
type Options struct {
	URL          string                       `mapstructure:"url" defaultdoc:"required" doc:"the endpoint, http or https; keep credentials in headers rather than in the URL"`
	Secret       confschema.Secret            `mapstructure:"secret" doc:"signing secret, whsec_ and the base64 of the key (Standard Webhooks); or several under secrets"`
	Secrets      []confschema.Secret          `mapstructure:"secrets" doc:"signing secrets during a rotation (new and old): the request carries a signature for each"`
	Timeout      time.Duration                `mapstructure:"timeout" doc:"bounds one request; the relay's delivery deadline bounds it too"`
	Headers      map[string]confschema.Secret `mapstructure:"headers" doc:"extra static headers, names kept as written; their values are secrets, never shown"`
	AllowPrivate bool                         `mapstructure:"allow_private" doc:"let the sink reach loopback, private and link-local addresses, refused by default"`
}

// DefaultOptions returns the options a webhook sink has before its options
// block applies.
func DefaultOptions() Options { return Options{Timeout: DefaultTimeout} }

// config is Options checked and decoded.
type config struct {
	url          string
	secrets      []standardwebhooks.Secret
	timeout      time.Duration
	headers      http.Header
	allowPrivate bool
}

// check checks what decoding cannot and returns the options as the sink
// runs them. Errors name the option at fault and never repeat a secret, a
// header value or the URL (which may carry a token).
func (o Options) check() (config, error) {
	c := config{url: o.URL, timeout: o.Timeout, allowPrivate: o.AllowPrivate}
	if err := standardwebhooks.CheckURL(o.URL); err != nil {
		return c, fmt.Errorf("option url: %w", err)
	}
	if c.timeout <= 0 {
		return c, fmt.Errorf("option timeout: must be positive, got %s", c.timeout)
	}
	var err error
	if c.secrets, err = parseSecrets(o.Secret, o.Secrets); err != nil {
		return c, err
	}
	if c.headers, err = parseHeaders(o.Headers); err != nil {
		return c, err
	}
	return c, nil
}

func parseSecrets(secret confschema.Secret, secrets []confschema.Secret) ([]standardwebhooks.Secret, error) {
	if secret != "" && len(secrets) > 0 {
		return nil, errors.New("options secret and secrets: set one of them (list every secret under secrets)")
	}
	name := "secrets"
	if secret != "" {
		name, secrets = "secret", []confschema.Secret{secret}
	}
	parsed := make([]standardwebhooks.Secret, len(secrets))
	for i, s := range secrets {
		var err error
		if parsed[i], err = standardwebhooks.ParseSecret(string(s)); err != nil {
			if name == "secret" {
				return nil, fmt.Errorf("option secret: %w", err)
			}
			return nil, fmt.Errorf("option secrets[%d]: %w", i, err)
		}
	}
	return parsed, nil
}

func parseHeaders(headers map[string]confschema.Secret) (http.Header, error) {
	h := make(http.Header, len(headers))
	for name, value := range headers {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("option headers: %q is not a valid header name", name)
		}
		for _, r := range reservedHeaders {
			if strings.EqualFold(name, r) {
				return nil, fmt.Errorf("option headers: %s is set by the webhook sink itself", r)
			}
		}
		if !httpguts.ValidHeaderFieldValue(string(value)) {
			return nil, fmt.Errorf("option headers: the value of %s holds characters a header cannot carry", name)
		}
		h.Set(name, string(value))
	}
	return h, nil
}
