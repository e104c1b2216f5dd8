package cmd_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/cmd"
)

// TestVersionFlag: --version prints the version and exits 0.
func TestVersionFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	code := cmd.Execute(context.Background(), []string{"--version"},
		cmd.IO{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: func(string) (string, bool) { return "", false }})
	if code != cmd.ExitOK || !strings.HasPrefix(out.String(), "outboxd version ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
