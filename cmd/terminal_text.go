package cmd

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/outboxd/outboxd/internal/safetext"
)

// Stored text (sink names, dedup keys, receivers' errors) came from
// outside, and a terminal obeys what it prints: ESC starts sequences that
// recolour, move the cursor, set the window title or write the clipboard;
// CR and backspaces overwrite what came before; bidirectional overrides
// show characters in another order than they are stored. Everything the
// commands print for a person therefore passes through terminalText, and
// their JSON through terminalJSON: such characters are shown as escapes.

// needsEscape reports whether a terminal could act on r instead of
// showing it: the control characters safetext escapes in stored text, and
// also bidirectional controls and the Unicode line and paragraph
// separators.
func needsEscape(r rune) bool {
	return safetext.Control(r) ||
		(r >= utf8.RuneSelf && (unicode.Is(unicode.Bidi_Control, r) || unicode.In(r, unicode.Zl, unicode.Zp)))
}

// terminalText returns s with every character needsEscape names, and every
// byte that is not UTF-8, written as a Go escape (\x1b, \r, \u202e, \xff).
func terminalText(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || needsEscape(r) })
	if i < 0 {
		return s // the common case: nothing to escape, no copy
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r):
			quoted := strconv.QuoteRune(r) // '\x1b'
			b.WriteString(quoted[1 : len(quoted)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// terminalCell is terminalText for one cell of a table: whitespace runs,
// newlines and tabs included, become one space.
func terminalCell(s string) string {
	return strings.Join(strings.Fields(terminalText(s)), " ")
}

// terminalJSON rewrites the characters needsEscape names inside the
// strings of the JSON text js as \u escapes: the same JSON value, safe to
// show. encoding/json already escapes C0 controls; C1 and bidirectional
// controls it writes as they are. Outside strings valid JSON holds only
// whitespace, which needsEscape leaves alone.
func terminalJSON(js []byte) []byte {
	if bytes.IndexFunc(js, needsEscape) < 0 {
		return js
	}
	var b bytes.Buffer
	for len(js) > 0 {
		r, size := utf8.DecodeRune(js)
		if needsEscape(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(js[:size])
		}
		js = js[size:]
	}
	return b.Bytes()
}
