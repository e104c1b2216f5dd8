package cmd

import (
	"encoding/json"
	"testing"
)

func TestTerminalText(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"plain text, ünïcode, tab\tand\nnewline": "plain text, ünïcode, tab\tand\nnewline",
		"\x1b[31mred\x1b[0m":                     `\x1b[31mred\x1b[0m`,
		"over\rwritten\b\x7f":                    `over\rwritten\b\x7f`,
		"c1 \u0085 \u009b":                       `c1 \u0085 \u009b`,
		"bidi \u202e \u2066 \u200f, sep \u2028":  `bidi \u202e \u2066 \u200f, sep \u2028`,
		"bad \xff\xfe utf-8":                     `bad \xff\xfe utf-8`,
	}
	for in, want := range cases {
		if got := terminalText(in); got != want {
			t.Errorf("terminalText(%q) = %q, want %q", in, got, want)
		}
	}
	if got := terminalCell("a\n\tb  \rc"); got != `a b \rc` {
		t.Errorf("terminalCell = %q", got)
	}
}

// TestTerminalJSON: the rewritten JSON holds no character a terminal acts
// on and decodes to the same value.
func TestTerminalJSON(t *testing.T) {
	t.Parallel()
	value := map[string]string{"k\u202e": "a\x1b\u0085\u009b\u2029\x7fz"}
	js, err := json.MarshalIndent(value, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	safe := terminalJSON(js)
	if got := terminalText(string(safe)); got != string(safe) {
		t.Errorf("terminalJSON left characters to escape: %q", safe)
	}
	var back map[string]string
	if err := json.Unmarshal(safe, &back); err != nil || back["k\u202e"] != value["k\u202e"] {
		t.Errorf("terminalJSON changed the value: %q (%v)", safe, err)
	}
}
