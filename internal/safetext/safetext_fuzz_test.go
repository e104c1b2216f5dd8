package safetext

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzText: whatever a receiver answers, the stored text is valid UTF-8,
// holds no control character but newline and tab, fits its limit, and
// keeps text that was already safe and short unchanged. (Mutation: letting
// escape copy \x00 through fails this target on its seeds.)
func FuzzText(f *testing.F) {
	for _, seed := range []string{"", "plain", "HTTP/1.1 500 Oops\xff\x00\x1b[31m", "tab\tnew\nline", "\u0085\u009f\x7f",
		"é" + strings.Repeat("✓", 50), "\xed\xa0\x80 lone surrogate"} {
		f.Add(seed, 64)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = len(truncatedMark) + abs(limit)%(4*MaxErrorBytes)
		got := Text(s, limit)
		if !utf8.ValidString(got) {
			t.Fatalf("Text(%q) = %q: not valid UTF-8", s, got)
		}
		for _, r := range got {
			if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
				t.Fatalf("Text(%q) = %q: holds control character %U", s, got, r)
			}
		}
		if len(got) > limit {
			t.Fatalf("Text(%q, %d) is %d bytes long", s, limit, len(got))
		}
		if clean(s) && len(s) <= limit && got != s {
			t.Fatalf("Text changed safe text %q to %q", s, got)
		}
	})
}

// FuzzReceipt: whatever a sink records as its receipt, what is stored is
// nil for nil, otherwise one JSON value that jsonb accepts (valid UTF-8, no
// \u0000 and no lone surrogate escape) within MaxReceiptBytes. (Mutation:
// Receipt returning its input whenever it is valid JSON fails this target
// on its \u0000 seed.)
func FuzzReceipt(f *testing.F) {
	for _, seed := range []string{`{"ts":"1"}`, `{"n":1e1000000}`, `{"a":"\u0000"}`, `"\ud800"`, `[1, 2.5e3, "x\u001b"]`, `not json`, `{"a":1} trailing`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, receipt []byte) {
		got := Receipt(receipt)
		if receipt == nil {
			if got != nil {
				t.Fatalf("Receipt(nil) = %s", got)
			}
			return
		}
		if len(got) > MaxReceiptBytes {
			t.Fatalf("stored receipt is %d bytes long", len(got))
		}
		dec := json.NewDecoder(bytes.NewReader(got))
		dec.UseNumber() // jsonb's numeric takes numbers float64 cannot hold
		var v any
		if err := dec.Decode(&v); err != nil || dec.More() {
			t.Fatalf("Receipt(%q) = %q: not one JSON value (%v)", receipt, got, err)
		}
		if !utf8.Valid(got) {
			t.Fatalf("Receipt(%q) = %q: not valid UTF-8", receipt, got)
		}
		if esc := refusedEscape(got); esc != "" {
			t.Fatalf("Receipt(%q) = %q: holds %s, which jsonb refuses", receipt, got, esc)
		}
	})
}

// refusedEscape returns the first \u escape in the JSON text raw that jsonb
// refuses (\u0000, or a surrogate not followed by its pair), or "".
func refusedEscape(raw []byte) string {
	for i := 0; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character; outside strings valid JSON has no backslash
		if raw[i] != 'u' || i+5 > len(raw) {
			continue
		}
		code, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 16)
		switch {
		case err != nil:
		case code == 0:
			return `\u0000`
		case code >= 0xdc00 && code <= 0xdfff:
			return `a lone low surrogate`
		case code >= 0xd800 && code <= 0xdbff && !bytes.HasPrefix(raw[i+5:], []byte(`\u`)):
			return `a lone high surrogate`
		}
		i += 4
	}
	return ""
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// A number beyond jsonb's numeric range (found by FuzzReceipt: the fast
// path stored it as it was, and PostgreSQL refused the row's write with
// SQLSTATE 22003) is kept as its text.
func TestReceiptKeepsHugeNumbersAsText(t *testing.T) {
	got := string(Receipt([]byte(`{"n":1e1000000,"m":2.5e3,"k":7}`)))
	if got != `{"k":7,"m":2.5e3,"n":"1e1000000"}` {
		t.Fatalf("Receipt = %s", got)
	}
}
