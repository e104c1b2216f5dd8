// Package safetext makes text that came from outside the relay (a
// receiver's error, a receipt, a recovered panic) safe to store in
// PostgreSQL and to show: valid UTF-8, no NUL, no control characters but
// newline and tab, and bounded in size.
package safetext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of what the relay stores per attempt. An error needs a status
// line and a sentence or two of the receiver's answer; a receipt an id or
// two. Anything longer is a receiver's page of HTML or a runaway message.
const (
	// MaxErrorBytes bounds a stored error (last_error, failed_attempts).
	MaxErrorBytes = 2 << 10
	// MaxReceiptBytes bounds a stored receipt (its JSON encoding).
	MaxReceiptBytes = 8 << 10
)

// truncatedMark ends text cut at its limit.
const truncatedMark = " ...(truncated)"

// Text returns s made safe: each invalid UTF-8 byte and each control
// character other than newline and tab is written as a visible escape
// (\xff, \x00, \u0085), so nothing is lost silently; the result is cut at a
// character boundary to at most limit bytes, marked as truncated.
func Text(s string, limit int) string {
	if clean(s) && len(s) <= limit {
		return s // the common case: nothing to copy
	}
	escaped := escape(s, limit)
	if len(escaped) <= limit {
		return escaped
	}
	cut := max(0, limit-len(truncatedMark))
	for cut > 0 && !utf8.RuneStart(escaped[cut]) {
		cut--
	}
	return escaped[:cut] + truncatedMark
}

// escape writes s with its unsafe bytes and characters escaped, stopping
// once the result is longer than limit (the caller cuts it then).
func escape(s string, limit int) string {
	var b strings.Builder
	b.Grow(min(len(s), limit) + 1)
	for i := 0; i < len(s) && b.Len() <= limit; {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Control reports whether r is a control character Text escapes: a C0
// control other than newline and tab, DEL, or a C1 control. Whatever shows
// text from outside escapes at least these.
func Control(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}

// clean reports whether s needs no change apart from its length.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return cleanUTF8(s[i:])
		}
		if Control(rune(c)) {
			return false
		}
	}
	return true
}

func cleanUTF8(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || Control(r) {
			return false
		}
	}
	return true
}

// Receipt returns a receipt (JSON) made safe to store as jsonb: every
// string in it made safe with Text (jsonb refuses \u0000 and lone
// surrogates), and the whole no longer than MaxReceiptBytes; a receipt
// that is not JSON, or too long, is replaced by a note saying so.
func Receipt(receipt []byte) []byte {
	if receipt == nil {
		return nil
	}
	if len(receipt) <= MaxReceiptBytes && plainJSON(receipt) && json.Valid(receipt) {
		return receipt // printable ASCII without escapes that jsonb could refuse
	}
	dec := json.NewDecoder(bytes.NewReader(receipt))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return note("receipt is not valid JSON (%d bytes); not stored", len(receipt))
	}
	out, err := json.Marshal(cleanValue(v))
	if err != nil {
		return note("receipt could not be re-encoded: %v", err)
	}
	if len(out) > MaxReceiptBytes {
		return note("receipt of %d bytes is over the limit of %d; not stored", len(out), MaxReceiptBytes)
	}
	return out
}

// plainJSON reports whether b holds printable ASCII only, no \u escape and
// no number with an exponent (jsonb refuses one beyond its numeric range,
// such as 1e1000000), so that as JSON it can only hold what jsonb stores.
// A digit followed by e or E inside a string makes it false too, which
// costs only the slower, exact path.
func plainJSON(b []byte) bool {
	for i, c := range b {
		if c < 0x20 || c >= 0x7f {
			return false
		}
		if (c == 'e' || c == 'E') && i > 0 && b[i-1] >= '0' && b[i-1] <= '9' {
			return false
		}
	}
	return !bytes.Contains(b, []byte(`\u`))
}

func cleanValue(v any) any {
	switch v := v.(type) {
	case string:
		return Text(v, MaxReceiptBytes)
	case json.Number:
		// Beyond float64 is beyond what a receipt means as a number, and
		// may be beyond jsonb's numeric range: kept as its text.
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return string(v)
		}
		return v
	case []any:
		for i := range v {
			v[i] = cleanValue(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			out[Text(k, MaxReceiptBytes)] = cleanValue(item)
		}
		return out
	default:
		return v
	}
}

func note(format string, args ...any) []byte {
	b, _ := json.Marshal(map[string]string{"outboxd_note": fmt.Sprintf(format, args...)})
	return b
}
