package outboxd_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
)

// jsonbCases are JSON texts at the edge of what PostgreSQL's jsonb stores
// (NUL escapes, surrogate halves and pairs, escaped backslashes before a
// "u", invalid UTF-8), with whether it stores them.
var jsonbCases = []struct {
	json     string
	storable bool
}{
	{`{"a":"\u0000"}`, false},
	{`{"a\u0000":1}`, false},
	{`["x\ud800"]`, false},
	{`"\udc00"`, false},
	{`{"a":"\ud800\u0041"}`, false},
	{`{"a":"\ud800\ud800\udc00"}`, false},
	{`{"a":"\ud800"}`, false},
	{`{"a":"\\\u0000"}`, false},
	{"{\"a\":\"\xff\"}", false},
	{`{"a":"\uD800\uDC00"}`, true},
	{`{"a":"\ud83d\ude00 \u00e9\u0041"}`, true},
	{`{"a":"\\u0000 \\ud800"}`, true},
	{`{"a":"\u0001\u001f\u007f"}`, true},
	{`{"u":"\\"}`, true},
}

// TestEnqueueRefusesPayloadsJSONBCannotStore: a payload PostgreSQL cannot
// store in jsonb is refused by Enqueue as the producer's mistake
// (ErrInvalidMessage, naming the payload) before it reaches the table, and
// everything jsonb can store is accepted. PostgreSQL's own parser confirms
// each case's verdict. Before the check, such payloads failed inside the
// INSERT: a database error, a 500 from the HTTP API.
// (Mutation: checkJSONBEscapes accepting everything fails this test.)
func TestEnqueueRefusesPayloadsJSONBCannotStore(t *testing.T) {
	b := coretest.Setup(t)
	for i, tt := range jsonbCases {
		t.Run(fmt.Sprintf("%d %q", i, tt.json), func(t *testing.T) {
			var ignored string
			pgErr := b.Pool.QueryRow(b.Ctx, "SELECT $1::text::jsonb::text", tt.json).Scan(&ignored)
			if (pgErr == nil) != tt.storable {
				t.Fatalf("PostgreSQL's verdict (%v) is not the table's (storable: %v)", pgErr, tt.storable)
			}
			msg := outboxd.Message{Sink: "s", DedupKey: fmt.Sprint("case-", i), Payload: json.RawMessage(tt.json)}
			_, err := b.Outbox.Enqueue(b.Ctx, b.Pool, msg)
			switch {
			case tt.storable && err != nil:
				t.Fatalf("PostgreSQL stores it, Enqueue refused it: %v", err)
			case !tt.storable && (!errors.Is(err, outboxd.ErrInvalidMessage) || !strings.Contains(err.Error(), "payload: ")):
				t.Fatalf("Enqueue: %v, want ErrInvalidMessage naming the payload", err)
			}
		})
	}
}
