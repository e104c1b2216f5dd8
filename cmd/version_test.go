package cmd

import (
	"bytes"
	"context"
	"encoding/json"
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

// TestVersionJSON: `version -o json` prints the build's fields as JSON.
// (Mutation checked: the json branch removed prints the text, which does
// not decode.)
func TestVersionJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	code := execute(context.Background(), []string{"version", "-o", "json"},
		streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: func(string) (string, bool) { return "", false }})
	var v versionJSON
	if err := json.Unmarshal(out.Bytes(), &v); code != exitOK || err != nil || v.Version == "" || v.GoVersion == "" || v.RevisionNotes == nil {
		t.Fatalf("exit %d, stdout %q, stderr %q, %v", code, out.String(), errOut.String(), err)
	}
}
