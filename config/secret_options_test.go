package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/registry"
)

// signerType is a custom sink type whose secret options are declared by
// type, under names no word list would guess: signing_key and passphrase.
// It is careless on purpose: it fails every delivery, and refuses a short
// passphrase, with errors that quote its secrets.
const signerType = "test-signer"

type signerOptions struct {
	SigningKey confschema.Secret `mapstructure:"signing_key" doc:"HMAC key"`
	Passphrase confschema.Secret `mapstructure:"passphrase" doc:"unlocks the key"`
	Label      string            `mapstructure:"label" doc:"shown as is"`
}

func init() {
	registry.Register(registry.Define(signerType, "signs and fails", signerOptions{}, func(_ string, o signerOptions, _ sink.Env) (sink.Sink, error) {
		if len(o.Passphrase) < 12 {
			return nil, fmt.Errorf("passphrase %s is too short", string(o.Passphrase))
		}
		return sink.Func(func(context.Context, *sink.Delivery) error {
			return sink.Permanent(fmt.Errorf("signing with key %s (passphrase %s) failed", string(o.SigningKey), string(o.Passphrase)))
		}), nil
	}))
}

// A custom sink's options declared as confschema.Secret are secrets, though
// their names hold no "token" or "password": config show prints them
// redacted, and the one scrubber (internal/secret, taught by the
// configuration) removes them from config check's problems, log records,
// errors, and the delivery errors the relay stores and records in spans.
// The option that is not declared secret is shown as is.
// (Mutations: Passphrase declared as string fails this test: config show
// prints it and the scrubber misses it; the relay's storedError ignoring
// Config.Redact fails it at last_error and the span; registry.Type.Secrets
// counting every option as a secret whatever the type declares fails it at
// the webhook's URL.)
func TestCustomSinkSecretOptionsAreRedactedEverywhere(t *testing.T) {
	t.Parallel()
	const key, pass, label = "sk-9f8e7d6c5b4a", "correct-horse-battery", "visible-label"
	const hookURL, hookSecret = "https://hooks.example.com/orders", "whsec_c2VjcmV0LWtleS1vZi10aGUtd2ViaG9vay1zaW5r"
	doc := func(passphrase string) string {
		return fmt.Sprintf("sinks:\n  signer:\n    type: %s\n    options: {signing_key: %s, passphrase: %s, label: %s}\n", signerType, key, passphrase, label) +
			"  hook:\n    type: webhook\n    options: {url: " + hookURL + ", secret: " + hookSecret + "}\n"
	}
	leaks := func(where, text string) {
		t.Helper()
		for _, s := range []string{key, pass, "tiny-pass", hookSecret} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows the secret %q:\n%s", where, s, text)
			}
		}
	}

	// config check: the sink's own error quotes the short passphrase.
	path := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(path, []byte(doc("tiny-pass")), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(Source{Path: path, PathGiven: true, Env: EnvMap(nil)}, Everything)
	if err == nil {
		t.Fatal("a passphrase the sink refuses loaded")
	}
	leaks("config check", secret.NewScrubber(loaded.Secrets...).String(err.Error()))

	// config show.
	cfg, err := Parse([]byte(doc(pass)), "c.yaml", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	if err := cfg.WriteRedacted(&shown); err != nil {
		t.Fatal(err)
	}
	leaks("config show", shown.String())
	if !strings.Contains(shown.String(), "label: "+label) || !strings.Contains(shown.String(), `passphrase: "`+secret.Redacted) {
		t.Errorf("config show hides the wrong options:\n%s", shown.String())
	}

	// Logs and errors, which keep what is not secret: the label, and a
	// built-in sink's URL (its type declares its options too).
	scrub := secret.NewScrubber(cfg.Secrets()...)
	for _, kept := range []string{label, hookURL} {
		if got := scrub.String(kept); got != kept {
			t.Errorf("the scrubber turns %q, no secret, into %q", kept, got)
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{ReplaceAttr: scrub.ReplaceAttr})) // as telemetry.NewLogger
	log.Error("sink failed "+key, "error", errors.New("with "+pass), slog.String("detail", pass))
	leaks("a log record", logs.String())
	leaks("an error", scrub.Error(fmt.Errorf("wrapped: %w", errors.New(key+" "+pass))).Error())

	// The relay's stored errors and spans, with the binary's wiring.
	pool, ob := testdb.New(t)
	if _, err := ob.Enqueue(t.Context(), pool, outboxd.Message{Sink: "signer", DedupKey: "k1", Payload: map[string]int{"n": 1}}); err != nil {
		t.Fatal(err)
	}
	tel := coretest.NewTelemetry(t)
	rc := cfg.RelayConfig()
	rc.PollInterval, rc.TracerProvider, rc.Redact = 50*time.Millisecond, tel.TracerProvider, scrub.String
	signals := testrelay.Run(t, pool, ob.Schema(), rc)
	signals.WaitWritten(t, 30*time.Second, "signer", "dead", 1)
	var lastError string
	if err := pool.QueryRow(t.Context(), "SELECT last_error FROM "+ob.Schema()+".messages WHERE dedup_key = 'k1'").Scan(&lastError); err != nil {
		t.Fatal(err)
	}
	leaks("last_error", lastError)
	if !strings.Contains(lastError, "signing with key "+secret.Redacted) {
		t.Errorf("last_error %q, want the sink's error with its key redacted", lastError)
	}
	testrelay.WaitFor(t, 10*time.Second, "the delivery span", func() bool { return len(tel.Ended("send signer")) > 0 })
	for _, span := range tel.Ended("send signer") {
		leaks("the delivery span", fmt.Sprint(span.Status, span.Events))
	}
}
