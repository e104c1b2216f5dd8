// Command configdocs writes docs/configuration.md from the declarations of
// the configuration's keys: the binary's (config.Config) and the options of
// each built-in sink type (their packages' Options). Run it through
// `go generate ./config`; a test fails while the committed file is stale.
package main

import (
	"bytes"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/template"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/builtin"
)

// The page documents the sink types of the stock binary.
func init() { builtin.Register() }

//go:embed configuration.md.tmpl
var page string

// exampleSink is the sinks block whose effective values give the
// documented defaults of a sink's keys: a type with no limit of its own, and
// a rate limit, so that its burst default shows.
const exampleSink = "sinks: {example: {type: discard, rate_limit: {rate: 1, per: 1s}}}"

// sinkType is one sink type's section of the page.
type sinkType struct {
	Name, Doc string
	Options   []confschema.Key
}

func main() {
	out := flag.String("o", "docs/configuration.md", "file to write")
	flag.Parse()
	doc, err := render()
	if err == nil {
		err = os.WriteFile(*out, doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdocs:", err)
		os.Exit(1)
	}
}

// render returns the page.
func render() ([]byte, error) {
	defaults, err := config.Parse([]byte(exampleSink), "", func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, fmt.Errorf("the defaults: %w", err)
	}
	var types []sinkType
	for _, name := range registry.Types() {
		t, _ := registry.Lookup(name)
		st := sinkType{Name: t.Name, Doc: t.Doc}
		if t.Options != nil {
			st.Options = confschema.Keys(t.Options)
		}
		types = append(types, st)
	}
	tmpl, err := template.New("page").Funcs(template.FuncMap{"cell": cell, "def": def}).Parse(page)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = tmpl.Execute(&b, map[string]any{"Keys": confschema.Keys(defaults), "SinkTypes": types})
	return b.Bytes(), err
}

// cell makes text safe in a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// def writes a key's default for the table: words where the declaration
// describes it, else the value as code.
func def(k confschema.Key) string {
	switch {
	case k.DefaultDoc != "":
		return cell(k.DefaultDoc)
	case k.Default == "":
		return "none"
	}
	return "`" + cell(k.Default) + "`"
}
