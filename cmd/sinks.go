package cmd

import (
	"maps"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/registry"

	// The built-in sink types register themselves here, in the one place a
	// reader looks for them. Custom builds register theirs before Main.
	_ "github.com/outboxd/outboxd/sinks/email"
	_ "github.com/outboxd/outboxd/sinks/kafka"
	_ "github.com/outboxd/outboxd/sinks/nats"
	_ "github.com/outboxd/outboxd/sinks/rabbitmq"
	_ "github.com/outboxd/outboxd/sinks/slack"
	_ "github.com/outboxd/outboxd/sinks/webhook"
)

// buildSinks creates every configured sink instance through the registry.
// A factory's complaint (a missing or misspelt option) is a configuration
// error naming the sink.
func buildSinks(cfg *Config) ([]core.SinkConfig, error) {
	var (
		out      []core.SinkConfig
		problems []string
	)
	for _, name := range slices.Sorted(maps.Keys(cfg.Sinks)) {
		spec := cfg.Sinks[name]
		sink, err := registry.Build(spec.Type, name, spec.Options)
		if err != nil {
			problems = append(problems, "sinks."+name+": "+err.Error())
			continue
		}
		sc := core.SinkConfig{
			Name:        name,
			Type:        spec.Type,
			Sink:        sink,
			MaxAttempts: spec.MaxAttempts,
			Backoff:     core.Backoff{Initial: spec.Backoff.Initial, Max: spec.Backoff.Max},
			MaxInFlight: spec.MaxInFlight,
		}
		if rl := spec.RateLimit; rl != nil {
			sc.RateLimit = &core.RateLimit{Rate: rl.Rate, Per: rl.Per, Burst: rl.Burst}
		}
		out = append(out, sc)
	}
	if len(problems) > 0 {
		return nil, &ConfigError{File: cfg.File, Problems: problems}
	}
	return out, nil
}

// checkSink reports a sink name the configuration does not know: a row for
// it would never be delivered.
func checkSink(cfg *Config, name string) error {
	if _, ok := cfg.Sinks[name]; ok {
		return nil
	}
	return badInputf("unknown sink %q (configured sinks: %s)", name, sinkList(cfg))
}

func sinkList(cfg *Config) string {
	names := slices.Sorted(maps.Keys(cfg.Sinks))
	if len(names) == 0 {
		return "none; add one under sinks: in the configuration"
	}
	return strings.Join(names, ", ")
}
