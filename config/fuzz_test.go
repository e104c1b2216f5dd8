package config

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/outboxd/outboxd/internal/secret"
)

// FuzzParseConfig feeds arbitrary documents to the loader: it must never
// panic, every failure must be a *Error (exit code 2), and a loaded
// configuration must print as YAML, its HTTP token redacted.
// (Mutation: WriteRedacted without redactValue fails this target on its
// seeds.)
func FuzzParseConfig(f *testing.F) {
	if example, err := os.ReadFile("../plugins.yaml"); err == nil {
		f.Add(string(example))
	}
	for _, seed := range []string{
		minimalConfig,
		"relay:\n  bach_size: 10\n",
		"http:\n  token: ${SECRET}\n  listen: 0.0.0.0:80\n",
		"sinks:\n  a:\n    type: log\n    options: {token: ${SECRET:-x}, to: [a, b]}\n",
		"relay: {lease: 1h, batch_size: ${N:-5}}\n",
		"sinks: [1, 2]\n",
		"__outboxd_ref_7__: $${\n",
	} {
		f.Add(seed)
	}
	env := EnvMap(map[string]string{"SECRET": "fuzz-secret-value", "N": "12"})
	f.Fuzz(func(t *testing.T, doc string) {
		cfg, err := Parse([]byte(doc), "fuzz.yaml", env)
		if err != nil {
			if ce := (*Error)(nil); !errors.As(err, &ce) {
				t.Fatalf("error that is no *Error (exit code 2): %v", err)
			}
			return
		}
		var out strings.Builder
		if err := cfg.WriteRedacted(&out); err != nil {
			t.Fatalf("loaded but cannot be shown: %v", err)
		}
		var shown struct {
			HTTP struct{ Token string } `yaml:"http"`
		}
		if err := yaml.Unmarshal([]byte(out.String()), &shown); err != nil {
			t.Fatalf("config show printed YAML that does not parse: %v\n%s", err, out.String())
		}
		if cfg.HTTP.Token != "" && shown.HTTP.Token != secret.Redacted {
			t.Fatalf("config show prints the HTTP token %q as %q:\n%s", cfg.HTTP.Token, shown.HTTP.Token, out.String())
		}
	})
}
