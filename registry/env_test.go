package registry_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
)

// envOptions are the options of the env-test type: none.
type envOptions struct{}

// defineRecorder defines a type whose constructor keeps the environment it
// is given in *got.
func defineRecorder(name string, got *sink.Env) registry.Type {
	return registry.Define(name, "Records its environment", envOptions{},
		func(_ string, _ envOptions, env sink.Env) (sink.Func, error) {
			*got = env
			return func(context.Context, *sink.Delivery) error { return nil }, nil
		})
}

// TestDefineCompletesTheEnvironment: a host that gives a sink nothing
// gets it the process's logger, named for the sink and following the
// logger the process installs later (serve makes its logger after loading
// the configuration, and again at each reload), and OpenTelemetry's
// providers; a resource published after the sink was built is found.
// (Mutations, each failing this test: the logger taken as slog.Default()
// at build time, which keeps writing to the default of then; the logger
// not named for the sink.)
func TestDefineCompletesTheEnvironment(t *testing.T) {
	var got sink.Env
	typ := defineRecorder("env-test", &got)
	resources := new(registry.Resources)
	if _, err := typ.New("audit", nil, sink.Env{Resources: resources}); err != nil {
		t.Fatal(err)
	}
	if got.TracerProvider == nil || got.MeterProvider == nil || got.Logger == nil {
		t.Fatalf("environment %+v: want a logger and both providers", got)
	}

	var out bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, nil)))
	got.Logger.Warn("posted without the check", "row", 7)
	if line := out.String(); !strings.Contains(line, `msg="posted without the check" sink=audit row=7`) {
		t.Errorf("logged %q; want the record through the logger installed after the build, naming the sink", line)
	}

	if _, ok := sink.LookupResource[*bytes.Buffer](got.Resources, "buffer"); ok {
		t.Fatal("found a resource before it was published")
	}
	resources.Publish("buffer", &out)
	if b, ok := sink.LookupResource[*bytes.Buffer](got.Resources, "buffer"); !ok || b != &out {
		t.Fatalf("LookupResource after Publish = %p, %v; want the published buffer", b, ok)
	}
	if _, ok := sink.LookupResource[*strings.Builder](got.Resources, "buffer"); ok {
		t.Fatal("LookupResource found a resource of another type")
	}
}

// TestTheHostsLoggerIsNamedForTheSink: a logger the host gives is the
// one the sink logs through, with the sink's name; the log type writes
// each message through it.
func TestTheHostsLoggerIsNamedForTheSink(t *testing.T) {
	var out bytes.Buffer
	host := slog.New(slog.NewTextHandler(&out, nil))
	s, err := registry.Build(registry.TypeLog, "audit", nil, sink.Env{Logger: host})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Deliver(context.Background(), &sink.Delivery{ID: 3, Sink: "audit", DedupKey: "k", Attempt: 1, Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if line := out.String(); !strings.Contains(line, `msg="message delivered" sink=audit id=3 dedup_key=k attempt=1 payload={}`) {
		t.Errorf("logged %q; want the message through the host's logger, naming the sink first", line)
	}
}

// TestATypeSaysWhichResourcesItsSinksUse: a host asks a type whether its
// sinks look up a resource before it makes it.
func TestATypeSaysWhichResourcesItsSinksUse(t *testing.T) {
	var got sink.Env
	typ := defineRecorder("uses-test", &got).WithResources("directory")
	if !typ.Uses("directory") || typ.Uses("other") {
		t.Fatalf("Uses: %v; want directory only", typ.Resources)
	}
	if registry.Log.Uses("directory") {
		t.Fatal("the log type uses no resource")
	}
}

// TestASinksSpansJoinTheirParentsProvider: a sink whose host gave no
// tracer provider records its spans with the provider of the span they
// are children of (the relay's delivery span, which a relay may record
// with a provider of its own, not the global one), and a span without a
// parent with the global provider. (Mutation: the environment filled with
// otel.GetTracerProvider() at build time loses the child span to the
// global no-op provider, as test/tracing's TestDeliveryTraceInJaeger
// showed.)
func TestASinksSpansJoinTheirParentsProvider(t *testing.T) {
	var got sink.Env
	if _, err := defineRecorder("span-test", &got).New("hooks", nil, sink.Env{}); err != nil {
		t.Fatal(err)
	}
	recorder := tracetest.NewSpanRecorder()
	relayProvider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	defer func() { _ = relayProvider.Shutdown(context.Background()) }()

	ctx, delivery := relayProvider.Tracer("relay").Start(context.Background(), "send hooks")
	_, call := got.TracerProvider.Tracer("sink").Start(ctx, "HTTP POST")
	call.End()
	delivery.End()

	var names []string
	for _, s := range recorder.Ended() {
		names = append(names, s.Name())
	}
	if want := []string{"HTTP POST", "send hooks"}; !slices.Equal(names, want) {
		t.Fatalf("the relay's provider recorded %q; want %q (the sink's span beside its parent)", names, want)
	}

	_, orphan := got.TracerProvider.Tracer("sink").Start(context.Background(), "no parent")
	orphan.End()
	if n := len(recorder.Ended()); n != 2 {
		t.Fatalf("a span without a parent went to the relay's provider (%d spans); want the global one", n)
	}
}
