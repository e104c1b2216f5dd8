package cmd

import (
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces a secret wherever the binary would otherwise show it.
const Redacted = "[REDACTED]"

// minScrubbedSecretLen keeps very short "secrets" (a test value such as
// "x") from turning every output into confetti. Real credentials are long.
const minScrubbedSecretLen = 4

// dsnPassword matches the password of a keyword/value connection string
// (host=... password=...).
var dsnPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// secretValues collects every secret in the settings: values of secret keys
// and passwords inside connection URLs.
func secretValues(settings map[string]any) []string {
	var out []string
	walkStrings("", settings, func(key, val string) {
		if val == "" {
			return
		}
		if isSecretKey(key) {
			out = append(out, val)
		}
		if u, err := url.Parse(val); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				out = append(out, p, url.QueryEscape(p))
			}
		}
		for _, m := range dsnPassword.FindAllStringSubmatch(val, -1) {
			out = append(out, strings.Trim(m[2], "'"))
		}
	})
	slices.Sort(out)
	return slices.Compact(out)
}

func walkStrings(key string, v any, visit func(key, val string)) {
	switch v := v.(type) {
	case string:
		visit(key, v)
	case map[string]any:
		for k, item := range v {
			walkStrings(joinKey(key, k), item, visit)
		}
	case []any:
		for _, item := range v {
			walkStrings(key, item, visit)
		}
	}
}

// redactValue returns what `config show` prints for a value at key.
func redactValue(key string, v any) any {
	switch v := v.(type) {
	case string:
		if v == "" {
			return v
		}
		if isSecretKey(key) {
			return Redacted
		}
		return redactURL(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			out[k] = redactValue(joinKey(key, k), item)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = redactValue(key, item)
		}
		return out
	default:
		return v
	}
}

// redactURL hides the password of a connection string, in URL or
// keyword/value form, and the query values of a URL (a webhook URL often
// carries its token as ?token=...), except connection settings known to
// be harmless.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && (u.User != nil || u.RawQuery != "") {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Redacted)
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
		return u.String()
	}
	return dsnPassword.ReplaceAllString(s, "${1}"+Redacted)
}

// harmlessQueryKeys are URL query parameters config show prints as they
// are: PostgreSQL connection settings that are never credentials.
var harmlessQueryKeys = map[string]bool{
	"sslmode": true, "application_name": true, "connect_timeout": true, "target_session_attrs": true,
}

// Scrubber removes known secret values from text that leaves the process:
// log records and error messages. It is the safety net behind redaction at
// the source, for errors from libraries that might quote a value.
type Scrubber struct{ secrets []string }

// NewScrubber returns a scrubber for the given secret values.
func NewScrubber(secrets ...string) *Scrubber {
	s := &Scrubber{}
	for _, v := range secrets {
		if len(v) >= minScrubbedSecretLen {
			s.secrets = append(s.secrets, v)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
	return s
}

// String returns text with every secret replaced by Redacted.
func (s *Scrubber) String(text string) string {
	for _, v := range s.secrets {
		text = strings.ReplaceAll(text, v, Redacted)
	}
	return text
}

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that scrubs the message,
// string attributes and errors.
func (s *Scrubber) ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
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
