package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/registry"
)

// committed is the generated page in the repository.
var committed = filepath.Join("..", "..", "..", "docs", "configuration.md")

// TestCommittedDocsAreCurrent fails when docs/configuration.md is not what
// the declarations generate: a key was added, renamed or redocumented
// without `go generate ./config`.
func TestCommittedDocsAreCurrent(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `go generate ./config` and commit the result", committed)
	}
}

// TestEveryKeyIsDocumented: each declared key, of the binary and of every
// registered sink type's options, has one line of documentation and
// appears in the page.
func TestEveryKeyIsDocumented(t *testing.T) {
	page, err := render()
	if err != nil {
		t.Fatal(err)
	}
	keys := confschema.Keys(config.Config{})
	for _, name := range registry.Types() {
		if typ, _ := registry.Lookup(name); typ.Options != nil {
			keys = append(keys, confschema.Keys(typ.Options)...)
		}
	}
	for _, k := range keys {
		if k.Doc == "" || strings.Contains(k.Doc, "\n") {
			t.Errorf("key %s: want one line of doc, got %q", k.Path, k.Doc)
		}
		if !bytes.Contains(page, []byte("| `"+k.Path+"` |")) {
			t.Errorf("key %s is not in the page", k.Path)
		}
	}
}
