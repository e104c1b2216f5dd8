package cmd

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/viper"
)

// settings returns the effective configuration as plain maps, durations
// as Go duration strings, ready to be redacted and printed.
func (c *Config) settings() map[string]any {
	sinks := map[string]any{}
	for name, s := range c.Sinks {
		sink := map[string]any{
			"type":          s.Type,
			"max_attempts":  s.MaxAttempts,
			"backoff":       map[string]any{"initial": dur(s.Backoff.Initial), "max": dur(s.Backoff.Max)},
			"max_in_flight": s.MaxInFlight,
			"options":       s.Options,
		}
		if rl := s.RateLimit; rl != nil {
			sink["rate_limit"] = map[string]any{"rate": rl.Rate, "per": dur(rl.Per), "burst": rl.Burst}
		}
		sinks[name] = sink
	}
	return map[string]any{
		"database": map[string]any{"url": c.Database.URL, "schema": c.Database.Schema},
		"relay": map[string]any{
			"batch_size": c.Relay.BatchSize, "lease": dur(c.Relay.Lease),
			"poll_interval": dur(c.Relay.PollInterval), "concurrency": c.Relay.Concurrency,
		},
		"retention": map[string]any{"sent": dur(c.Retention.Sent)},
		"http":      map[string]any{"listen": c.HTTP.Listen, "token": c.HTTP.Token, "allowed_hosts": c.HTTP.AllowedHosts},
		"telemetry": map[string]any{
			"service_name": c.Telemetry.ServiceName, "otlp_endpoint": c.Telemetry.OTLPEndpoint,
			"protocol": c.Telemetry.Protocol,
		},
		"sinks": sinks,
	}
}

func dur(d time.Duration) string { return d.String() }

// WriteRedacted prints the effective configuration as YAML with every
// secret replaced by Redacted.
func (c *Config) WriteRedacted(w io.Writer) error {
	redacted, _ := redactValue("", c.settings()).(map[string]any)
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.MergeConfigMap(redacted); err != nil {
		return fmt.Errorf("render configuration: %w", err)
	}
	if err := v.WriteConfigTo(w); err != nil {
		return fmt.Errorf("render configuration: %w", err)
	}
	return nil
}
