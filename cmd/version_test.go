package cmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestVersionFlag: --version prints the version and exits 0.
func TestVersionFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	code := execute(context.Background(), []string{"--version"},
		streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: func(string) (string, bool) { return "", false }})
	if code != exitOK || !strings.HasPrefix(out.String(), "outboxd version ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
