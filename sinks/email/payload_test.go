package email

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParsePayload(t *testing.T) {
	t.Parallel()
	defaultTo := []string{"ops@example.com"}
	tests := []struct {
		name    string
		payload string
		wantTo  []string
		wantCc  []string
		wantErr string
	}{
		{"text only goes to default", `{"text":"hi"}`, defaultTo, nil, ""},
		{"html only", `{"html":"<p>hi</p>","subject":"s"}`, defaultTo, nil, ""},
		{"payload to overrides", `{"text":"hi","to":["a@example.com"]}`, []string{"a@example.com"}, nil, ""},
		{"to and cc as strings", `{"text":"hi","to":"a@example.com","cc":"C <c@example.com>"}`,
			[]string{"a@example.com"}, []string{"C <c@example.com>"}, ""},
		{"empty to list falls back", `{"text":"hi","to":[]}`, defaultTo, nil, ""},
		{"no body", `{"subject":"s"}`, nil, nil, "neither text nor html"},
		{"empty bodies", `{"text":"","html":""}`, nil, nil, "neither text nor html"},
		{"invalid to", `{"text":"hi","to":["a@example.com","bad"]}`, nil, nil, "to[1]"},
		{"invalid cc", `{"text":"hi","cc":["bad"]}`, nil, nil, "cc[0]"},
		{"to of wrong type", `{"text":"hi","to":5}`, nil, nil, "want a mail address or a list"},
		{"unknown field", `{"body":"hi"}`, nil, nil, `unknown field "body"`},
		{"not an object", `"hi"`, nil, nil, "payload"},
		{"trailing data", `{"text":"hi"} {}`, nil, nil, "trailing data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := parsePayload(json.RawMessage(tc.payload), defaultTo)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.To, tc.wantTo) || !slices.Equal(p.Cc, tc.wantCc) {
				t.Fatalf("to=%v cc=%v, want to=%v cc=%v", p.To, p.Cc, tc.wantTo, tc.wantCc)
			}
		})
	}
}

func TestParsePayloadNoRecipients(t *testing.T) {
	t.Parallel()
	_, err := parsePayload(json.RawMessage(`{"text":"hi"}`), nil)
	if err == nil || !strings.Contains(err.Error(), "no recipients") {
		t.Fatalf("error = %v, want no recipients", err)
	}
}

func TestSubjectPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct{ prefix, subject, want string }{
		{"", "Disk full", "Disk full"},
		{"[ops]", "Disk full", "[ops] Disk full"},
		{"[ops]", "", "[ops]"},
		{"", "", ""},
	}
	for _, tc := range tests {
		s := &Sink{cfg: Options{SubjectPrefix: tc.prefix}}
		if got := s.subject(tc.subject); got != tc.want {
			t.Errorf("prefix %q subject %q: got %q, want %q", tc.prefix, tc.subject, got, tc.want)
		}
	}
}

func TestMessageID(t *testing.T) {
	t.Parallel()
	a := MessageID("mail", "order-1", "example.com")
	if a != MessageID("mail", "order-1", "example.com") {
		t.Fatal("MessageID is not deterministic")
	}
	if !strings.HasPrefix(a, "<") || !strings.HasSuffix(a, "@example.com>") || len(a) != 1+messageIDHashChars+len("@example.com>") {
		t.Fatalf("MessageID = %q: want <%d hex chars@example.com>", a, messageIDHashChars)
	}
	for _, other := range []string{
		MessageID("mail2", "order-1", "example.com"),
		MessageID("mail", "order-2", "example.com"),
		// The separator keeps ("ab","c") and ("a","bc") apart.
		MessageID("mai", "lorder-1", "example.com"),
	} {
		if other == a {
			t.Fatalf("MessageID collides: %q", a)
		}
	}
}
