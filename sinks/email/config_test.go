package email

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
)

func TestNewOptions(t *testing.T) {
	t.Parallel()
	base := func() map[string]any {
		return map[string]any{"smtp": "mail.example.com:587", "from": "Outbox <outbox@example.com>"}
	}
	with := func(k string, v any) map[string]any {
		o := base()
		o[k] = v
		return o
	}
	without := func(k string) map[string]any {
		o := base()
		delete(o, k)
		return o
	}
	tests := []struct {
		name    string
		options map[string]any
		wantErr string // empty: must succeed
	}{
		{"minimal", base(), ""},
		{"all options", map[string]any{
			"smtp": "mail.example.com:465", "username": "u", "password": "p", "tls": "tls",
			"from": "outbox@example.com", "to": []any{"a@example.com", "B <b@example.com>"}, "subject_prefix": "[x]",
		}, ""},
		{"to as comma list", with("to", "a@example.com,b@example.com"), ""},
		{"tls none", with("tls", "none"), ""},
		{"smtp missing", without("smtp"), "option smtp is required"},
		{"smtp without port", with("smtp", "mail.example.com"), "option smtp"},
		{"smtp bad port", with("smtp", "mail.example.com:70000"), "option smtp: port"},
		{"smtp empty host", with("smtp", ":25"), "option smtp"},
		{"tls unknown", with("tls", "ssl"), `option tls: "ssl"`},
		{"from missing", without("from"), "option from is required"},
		{"from invalid", with("from", "not an address"), "option from"},
		{"to invalid", with("to", []any{"ok@example.com", "nope"}), "option to[1]"},
		{"password without username", with("password", "hunter2"), "option password is set but username is empty"},
		{"unknown option", with("port", 25), "port"},
		{"wrong type", with("to", 42), "to"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Type.New("mail", tc.options, sink.Env{})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Build error = %v, want one containing %q", err, tc.wantErr)
			}
			if pw, ok := tc.options["password"].(string); ok && strings.Contains(err.Error(), pw) {
				t.Fatalf("error %q reveals the password", err)
			}
		})
	}
}

func TestNewDefaultsTLS(t *testing.T) {
	t.Parallel()
	s, err := newTestSink("mail", Options{SMTP: "mail.example.com:587", From: "outbox@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.TLS != DefaultTLS {
		t.Fatalf("tls = %q, want %q", s.cfg.TLS, DefaultTLS)
	}
	if s.server.domain != "example.com" {
		t.Fatalf("domain = %q, want example.com", s.server.domain)
	}
}

func TestOptionsStringHidesPassword(t *testing.T) {
	t.Parallel()
	cfg := Options{SMTP: "mail.example.com:587", Username: "u", Password: "hunter2", From: "o@example.com"}
	if s := cfg.String(); strings.Contains(s, "hunter2") || !strings.Contains(s, "password=(set)") {
		t.Fatalf("String() = %q: want the password redacted", s)
	}
}
