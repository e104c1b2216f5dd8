// Package secret is the one place that keeps secrets out of what leaves
// the process. A secret is declared, not guessed from a key's name: keys of
// type confschema.Secret (a sink's token, password, signing key, header
// values; http.token) are collected from the decoded configuration, and the
// secret parts of URLs and connection strings (passwords, credential query
// parameters, the path of a known incoming webhook) are found by their
// structure (Values). They are hidden where the configuration is shown
// (Redact, RedactAll) and scrubbed from every log record, error message,
// stored error and span (Scrubber), the binary's and the sinks'.
package secret

import (
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/outboxd/outboxd/confschema"
)

// Redacted replaces a secret wherever the program would otherwise show it.
const Redacted = confschema.SecretRedacted

// minScrubbedSecretLen keeps very short "secrets" (a test value such as
// "x") from turning every output into confetti. Real credentials are long.
const minScrubbedSecretLen = 4

// dsnPassword matches the password of a keyword/value connection string
// (host=... password=...).
var dsnPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// secretPaths match the URL paths of well-known incoming webhooks, whose
// last part (group 2) is the credential: Slack's /services/T.../B.../secret
// and its workflow webhooks, Discord's /api/webhooks/id/token, and
// Microsoft Teams' /webhookb2/.... They are matched on any host, since such
// URLs also go through proxies and test servers.
var secretPaths = []*regexp.Regexp{
	regexp.MustCompile(`^(/services/[^/]+/[^/]+/)(.+)$`),
	regexp.MustCompile(`^(/(?:workflows|triggers)/[^/]+/[^/]+/[^/]+/)(.+)$`),
	regexp.MustCompile(`^(/api/webhooks/[^/]+/)(.+)$`),
	regexp.MustCompile(`^(/webhookb2/)(.+)$`),
}

// secretQueryWords mark a URL query parameter that carries a credential
// (?token=..., ?api_key=..., ?sig=...).
var secretQueryWords = []string{"token", "key", "secret", "sig", "pass", "auth", "code", "credential"}

// harmlessQueryKeys are URL query parameters config show prints as they
// are: PostgreSQL connection settings that are never credentials.
var harmlessQueryKeys = map[string]bool{
	"sslmode": true, "application_name": true, "connect_timeout": true, "target_session_attrs": true,
}

// Values collects the secrets found by their structure anywhere in the
// settings, for the Scrubber: the secret parts of URLs and connection
// strings (see urlSecrets). Declared secrets (confschema.Secrets) are
// collected from the decoded configuration.
func Values(settings map[string]any) []string {
	var out []string
	walkStrings(settings, func(val string) {
		out = append(out, urlSecrets(val)...)
		for _, m := range dsnPassword.FindAllStringSubmatch(val, -1) {
			out = append(out, strings.Trim(m[2], "'"))
		}
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// Declared returns the values of declared secrets with, for a credential
// written "<scheme> <token>" (an Authorization header's "Bearer <token>"),
// the token alone too: it may be quoted on its own.
func Declared(values []string) []string {
	var out []string
	for _, val := range values {
		out = append(out, val)
		if scheme, credential, ok := strings.Cut(val, " "); ok && scheme != "" && !strings.Contains(credential, " ") {
			out = append(out, credential)
		}
	}
	return out
}

// urlSecrets returns the secret parts of s when it is a URL: the password
// of its user info (and its escaped form), a user name that stands alone in
// an http(s) URL (https://TOKEN@host), the values of credential-like
// query parameters, and the secret path part of a known webhook URL.
func urlSecrets(s string) []string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			out = append(out, p, url.QueryEscape(p))
		} else if isWeb(u) && u.User.Username() != "" {
			out = append(out, u.User.Username())
		}
	}
	for k, vals := range u.Query() {
		if isSecretQueryKey(k) {
			out = append(out, vals...)
		}
	}
	if _, secret, ok := splitSecretPath(u.Path); ok {
		out = append(out, secret, url.PathEscape(secret))
	}
	return out
}

func isWeb(u *url.URL) bool { return u.Scheme == "http" || u.Scheme == "https" }

func isSecretQueryKey(k string) bool {
	k = strings.ToLower(k)
	for _, w := range secretQueryWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// splitSecretPath splits the path of a known webhook URL into its public
// prefix and its secret.
func splitSecretPath(path string) (prefix, secret string, ok bool) {
	for _, re := range secretPaths {
		if m := re.FindStringSubmatch(path); m != nil {
			return m[1], m[2], true
		}
	}
	return "", "", false
}

// walkStrings calls visit for every string below v.
func walkStrings(v any, visit func(val string)) {
	switch v := v.(type) {
	case string:
		if v != "" {
			visit(v)
		}
	case map[string]any:
		for _, item := range v {
			walkStrings(item, visit)
		}
	case []any:
		for _, item := range v {
			walkStrings(item, visit)
		}
	}
}

// Strings returns every non-empty string below v: the options of a sink
// type that declares none, all of which are then treated as secrets.
func Strings(v any) []string {
	var out []string
	walkStrings(v, func(val string) { out = append(out, val) })
	return out
}

// Redact returns what `config show` prints for v: the secret parts of URLs
// and connection strings replaced by Redacted. Declared secrets are
// already Redacted in confschema.Values.
func Redact(v any) any { return redact(v, RedactURL) }

// RedactAll replaces every non-empty string below v: the options of a sink
// type that declares none, whose secrets cannot be told apart.
func RedactAll(v any) any { return redact(v, func(string) string { return Redacted }) }

func redact(v any, replace func(string) string) any {
	switch v := v.(type) {
	case string:
		if v == "" {
			return v
		}
		return replace(v)
	case yaml.MapSlice:
		out := make(yaml.MapSlice, len(v))
		for i, item := range v {
			out[i] = yaml.MapItem{Key: item.Key, Value: redact(item.Value, replace)}
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			out[k] = redact(item, replace)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = redact(item, replace)
		}
		return out
	default:
		return v
	}
}

// RedactURL hides the secret parts of a URL: the password of its user
// info, a user name that stands alone in an http(s) URL, the query values
// (a webhook URL often carries its token as ?token=...) except connection
// settings known to be harmless, and the secret path of a known webhook
// URL. A keyword/value connection string loses its password.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return dsnPassword.ReplaceAllString(s, "${1}"+Redacted)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Redacted)
		} else if isWeb(u) {
			u.User = url.User(Redacted)
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if !harmlessQueryKeys[k] {
				q[k] = []string{Redacted}
			}
		}
		u.RawQuery = q.Encode()
	}
	if prefix, _, ok := splitSecretPath(u.Path); ok {
		u.Path, u.RawPath = prefix+Redacted, ""
	}
	// url.URL escapes the brackets of Redacted; show it as written.
	return strings.ReplaceAll(u.String(), url.QueryEscape(Redacted), Redacted)
}

// Scrubber removes known secret values from text that leaves the process:
// log records, error messages, and the errors of a sink's client library,
// which might quote a connection URL or a credential. It is the safety net
// behind redaction at the source. The zero Scrubber knows no secrets.
type Scrubber struct{ secrets []string }

// NewScrubber returns a scrubber for the given secret values, each also in
// its URL-escaped forms. Values shorter than minScrubbedSecretLen are
// ignored.
func NewScrubber(secrets ...string) Scrubber {
	var s Scrubber
	for _, v := range secrets {
		if len(v) >= minScrubbedSecretLen {
			s.secrets = append(s.secrets, v, url.QueryEscape(v), url.PathEscape(v))
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
	s.secrets = slices.Compact(s.secrets)
	return s
}

// String returns text with every secret replaced by Redacted.
func (s Scrubber) String(text string) string {
	for _, v := range s.secrets {
		text = strings.ReplaceAll(text, v, Redacted)
	}
	return text
}

// Error returns err unchanged when its text holds no secret, and otherwise
// an error with the same chain (errors.Is and As still see the original)
// whose text has every secret replaced by Redacted.
func (s Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	text := s.String(err.Error())
	if text == err.Error() {
		return err
	}
	return &scrubbedError{text: text, err: err}
}

type scrubbedError struct {
	text string
	err  error
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that scrubs the message,
// string attributes and errors.
func (s Scrubber) ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(s.String(v.String()))
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			a.Value = slog.StringValue(s.String(x.Error()))
		case fmt.Stringer:
			a.Value = slog.StringValue(s.String(x.String()))
		case []byte:
			a.Value = slog.StringValue(s.String(string(x)))
		}
	}
	return a
}
