package email

import (
	"bytes"
	"encoding/json"
	"net/mail"
	"testing"
	"time"
)

// FuzzPayload feeds arbitrary payloads through parsing and composition. A
// payload is either refused or becomes a well-formed mail: parseable,
// from the configured sender, with exactly the derived Message-ID, and with
// no header smuggled in through a field (a subject holding "\r\nBcc: ...").
// The seed corpus is in testdata/fuzz/FuzzPayload.
// (Mutation: compose with a random Message-ID fails this target on its
// seeds.)
func FuzzPayload(f *testing.F) {
	s, err := newTestSink("fuzz", Options{SMTP: "mail.example.com:25", From: "outbox@example.com",
		To: []string{"ops@example.com"}, SubjectPrefix: "[fuzz]"})
	if err != nil {
		f.Fatal(err)
	}
	wantID := MessageID("fuzz", "key", "example.com")
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := parsePayload(json.RawMessage(raw), s.cfg.To)
		if err != nil {
			return
		}
		m, err := s.compose(p, wantID, "", created)
		if err != nil {
			t.Fatalf("compose of an accepted payload %q failed: %v", raw, err)
		}
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatalf("render %q: %v", raw, err)
		}
		parsed, err := mail.ReadMessage(&buf)
		if err != nil {
			t.Fatalf("payload %q rendered a mail that does not parse: %v", raw, err)
		}
		h := parsed.Header
		if ids := h["Message-Id"]; len(ids) != 1 || ids[0] != wantID {
			t.Fatalf("payload %q: Message-ID headers %q, want exactly %s", raw, ids, wantID)
		}
		if from := h.Get("From"); from != "<outbox@example.com>" {
			t.Fatalf("payload %q: From %q", raw, from)
		}
		if len(h["Bcc"]) > 0 || len(h["Subject"]) > 1 || len(h["To"]) != 1 {
			t.Fatalf("payload %q smuggled headers: %v", raw, h)
		}
	})
}
