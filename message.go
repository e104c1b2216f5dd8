package outboxd

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/internal/store"
)

// MaxDedupKeyBytes bounds a dedup key's length.
const MaxDedupKeyBytes = 255

// Message is what a producer enqueues.
type Message struct {
	// Sink names the configured sink instance that delivers the message.
	Sink string
	// DedupKey is unique per sink: enqueueing the same (Sink, DedupKey) twice
	// stores one row. Printable, at most MaxDedupKeyBytes bytes.
	DedupKey string
	// Payload is delivered to the sink. A json.RawMessage or []byte must hold
	// valid JSON and is stored as is; a string is stored as {"text": ...};
	// anything else is encoded with encoding/json.
	Payload any
	// Headers carry metadata to the sink. The caller's trace context is added
	// as traceparent/tracestate when ctx holds a span.
	Headers map[string]string
	// OrderingKey, when set, makes rows sharing it deliver strictly in id
	// order across all relays.
	OrderingKey string
	// AvailableAt delays the first attempt; zero means now (database clock).
	AvailableAt time.Time
	// MaxAttempts overrides the sink's max_attempts for this message.
	MaxAttempts int
}

// ErrInvalidMessage is wrapped by every validation error, so callers can tell
// bad input from a database failure with errors.Is.
var ErrInvalidMessage = errors.New("invalid message")

// validMessage is a Message checked and encoded for the database.
type validMessage struct {
	sink, dedupKey string
	payload        []byte
	headers        []byte
	orderingKey    *string
	availableAt    *time.Time
	maxAttempts    *int32
}

// emptyHeadersJSON is store.EmptyHeaders as the bytes a message without
// headers carries; shared, never written to.
var emptyHeadersJSON = []byte(store.EmptyHeaders)

// shape says which optional columns this message needs a batch enqueue to
// send; see store.BatchShape.
func (v validMessage) shape() store.BatchShape {
	var shape store.BatchShape
	for i, set := range []bool{string(v.headers) != store.EmptyHeaders, v.orderingKey != nil, v.maxAttempts != nil, v.availableAt != nil} {
		if set {
			shape |= 1 << i
		}
	}
	return shape
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("outbox: %w: %s", ErrInvalidMessage, fmt.Sprintf(format, args...))
}

// Validate reports whether Enqueue would accept msg, without touching the
// database: nil, or the error Enqueue would return, wrapping
// ErrInvalidMessage. A caller that must take or refuse a whole set of
// messages at once (the CLI's enqueue --file) checks each before storing
// any.
func (o *Outbox) Validate(ctx context.Context, msg Message) error {
	_, err := o.validate(ctx, msg)
	return err
}

// validate checks m before anything touches the database and encodes it.
func (o *Outbox) validate(ctx context.Context, m Message) (validMessage, error) {
	var v validMessage
	// The sink is a key of the row's unique index like the dedup key, and
	// held to the same rules: an over-long one would fail the insert with
	// an index error, not as the caller's mistake.
	if err := checkKey("sink", m.Sink); err != nil {
		return v, err
	}
	if err := checkKey("dedup key", m.DedupKey); err != nil {
		return v, err
	}
	if m.OrderingKey != "" {
		if err := checkKey("ordering key", m.OrderingKey); err != nil {
			return v, err
		}
		v.orderingKey = &m.OrderingKey
	}
	if m.MaxAttempts < 0 {
		return v, invalid("max attempts must not be negative, got %d", m.MaxAttempts)
	}
	if m.MaxAttempts > 0 {
		n := int32(min(m.MaxAttempts, 1<<30))
		v.maxAttempts = &n
	}
	if !m.AvailableAt.IsZero() {
		v.availableAt = &m.AvailableAt
	}
	payload, err := encodePayload(m.Payload)
	if err != nil {
		return v, err
	}
	if len(payload) > o.maxPayload {
		return v, invalid("payload is %d bytes, over the limit of %d", len(payload), o.maxPayload)
	}
	v.headers = emptyHeadersJSON
	if headers := withTraceContext(ctx, m.Headers); len(headers) > 0 {
		if v.headers, err = json.Marshal(headers); err != nil {
			return v, invalid("headers: %v", err)
		}
		if err := checkJSONBEscapes("headers", v.headers); err != nil {
			return v, err
		}
	}
	v.sink, v.dedupKey, v.payload = m.Sink, m.DedupKey, payload
	return v, nil
}

func checkKey(what, key string) error {
	if key == "" {
		return invalid("%s is empty", what)
	}
	if len(key) > MaxDedupKeyBytes {
		return invalid("%s is %d bytes, over the limit of %d", what, len(key), MaxDedupKeyBytes)
	}
	if printableASCII(key) {
		return nil
	}
	for _, r := range key {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return invalid("%s %q holds a character that is not printable", what, key)
		}
	}
	return nil
}

// printableASCII reports whether key is printable ASCII only, the common
// case, which needs no rune decoding.
func printableASCII(key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] > '~' {
			return false
		}
	}
	return true
}

func encodePayload(p any) ([]byte, error) {
	var b []byte
	switch p := p.(type) {
	case nil:
		return nil, invalid("payload is empty")
	case json.RawMessage:
		b = p
	case []byte:
		b = p
	case string:
		enc, err := json.Marshal(map[string]string{"text": p})
		if err != nil {
			return nil, invalid("payload: %v", err)
		}
		return enc, checkJSONBEscapes("payload", enc)
	default:
		enc, err := json.Marshal(p)
		if err != nil {
			return nil, invalid("payload cannot be encoded as JSON: %v", err)
		}
		// Go strings may hold NUL, which encoding/json writes as \u0000.
		return enc, checkJSONBEscapes("payload", enc)
	}
	if !json.Valid(b) {
		return nil, invalid("payload is not valid JSON")
	}
	if !utf8.Valid(b) {
		// json.Valid does not check the encoding; PostgreSQL refuses
		// invalid UTF-8 (SQLSTATE 22021).
		return nil, invalid("payload: not valid UTF-8")
	}
	return b, checkJSONBEscapes("payload", b)
}

// checkJSONBEscapes refuses the \u escapes in the valid JSON text b (the
// message's field) that PostgreSQL's jsonb cannot store: \u0000 (SQLSTATE
// 22P05) and a UTF-16 surrogate that is not half of a pair (22P02). Without
// it such a payload reaches the database and fails there, as a server error
// rather than the producer's mistake. Most payloads hold no \u at all and
// cost one bytes.Contains.
func checkJSONBEscapes(field string, b []byte) error {
	if problem := jsonbEscapeProblem(b); problem != "" {
		return invalid("%s: %s", field, problem)
	}
	return nil
}

// jsonbEscapeProblem says what in the valid JSON text b jsonb cannot store
// (see checkJSONBEscapes), or "".
func jsonbEscapeProblem(b []byte) string {
	if !bytes.Contains(b, []byte(`\u`)) {
		return ""
	}
	// In valid JSON a backslash only occurs inside a string and always
	// starts an escape: a \u escape is followed by four hex digits.
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++
		if b[i] != 'u' {
			continue
		}
		at := i - 1
		r := hexRune(b[i+1 : i+5])
		i += 4
		switch {
		case r == 0:
			return fmt.Sprintf("\\u0000 at byte %d: PostgreSQL cannot store a NUL character in jsonb", at)
		case !utf16.IsSurrogate(r):
		case r < 0xdc00 && i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' && isLowSurrogate(hexRune(b[i+3:i+7])):
			i += 6 // a high surrogate and its low half: one character
		default:
			return fmt.Sprintf("\\u%04x at byte %d is half of a UTF-16 surrogate pair, not a character; PostgreSQL cannot store it in jsonb", r, at)
		}
	}
	return ""
}

// hexRune decodes the four hex digits of a \u escape (json.Valid has
// checked them).
func hexRune(digits []byte) rune {
	var v [2]byte
	_, _ = hex.Decode(v[:], digits)
	return rune(v[0])<<8 | rune(v[1])
}

func isLowSurrogate(r rune) bool { return r >= 0xdc00 && r <= 0xdfff }

// traceContext is the W3C propagator used for the producer's trace context.
// It is fixed rather than the global propagator so the trace survives even
// when the application never configured one.
var traceContext = propagation.TraceContext{}

func withTraceContext(ctx context.Context, headers map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return headers // nothing to inject: spare a map per message
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return headers
	}
	for k, v := range headers {
		if _, set := carrier[k]; !set {
			carrier[k] = v
		}
	}
	return carrier
}
