package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/viper"

	"github.com/outboxd/outboxd/registry"
)

// LookupEnv reads one environment variable; os.LookupEnv in the binary, a
// map in tests, so loading never depends on the process environment by
// accident.
type LookupEnv func(name string) (string, bool)

// ConfigError lists everything wrong with a configuration. The binary exits
// with ExitConfig when it sees one.
type ConfigError struct {
	File     string
	Problems []string
}

func (e *ConfigError) Error() string {
	where := e.File
	if where == "" {
		where = "built-in defaults"
	}
	if len(e.Problems) == 1 {
		return fmt.Sprintf("configuration %s: %s", where, e.Problems[0])
	}
	return fmt.Sprintf("configuration %s:\n  - %s", where, strings.Join(e.Problems, "\n  - "))
}

// sinkNamePattern keeps sink names to what survives viper's lower-casing of
// keys and its use of "." as the key separator.
var sinkNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// LoadConfig reads the configuration file at path. When path is empty it
// reads OUTBOX_CONFIG or DefaultConfigFile, and a missing default file means
// the built-in defaults; a file named explicitly must exist.
func LoadConfig(path string, env LookupEnv) (*Config, error) {
	explicit := path != ""
	if !explicit {
		if p, ok := env(ConfigFileEnv); ok && p != "" {
			path, explicit = p, true
		} else {
			path = DefaultConfigFile
		}
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return ParseConfig(nil, "", env)
	case err != nil:
		return nil, &ConfigError{File: path, Problems: []string{fmt.Sprintf("cannot read: %v", err)}}
	}
	return ParseConfig(data, path, env)
}

// ParseConfig parses, expands, overrides and validates a plugins.yaml held
// in data; file names it in messages. Every problem found is reported at
// once in a *ConfigError.
func ParseConfig(data []byte, file string, env LookupEnv) (*Config, error) {
	fail := func(problems ...string) error { return &ConfigError{File: file, Problems: problems} }
	data, refs := hideRefs(data)
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fail(fmt.Sprintf("not valid YAML: %v", err))
	}
	sinkNames, problems := sinkNamesOf(v)
	known := knownKeys(sinkNames)
	applyEnvOverrides(v, known, env)
	problems = append(problems, unknownKeys(v, known, sinkNames)...)

	// Carry on past problems so that one run reports all of them.
	exp := expander{env: env, refs: refs}
	settings := exp.expandMap("", v.AllSettings())
	problems = append(problems, exp.missing...)
	cfg := &Config{File: file}
	if decodeProblems := decodeConfig(settings, cfg); len(decodeProblems) > 0 {
		return nil, fail(append(problems, decodeProblems...)...)
	}
	cfg.secrets = secretValues(settings)
	cfg.withDefaults()
	problems = append(problems, cfg.validate()...)
	if len(problems) > 0 {
		return nil, fail(problems...)
	}
	return cfg, nil
}

// sinkNamesOf returns the configured sink names, sorted, and a problem for
// each that is not a valid name or not a mapping.
func sinkNamesOf(v *viper.Viper) ([]string, []string) {
	raw := v.Get("sinks")
	if raw == nil {
		return nil, nil
	}
	sinks, ok := raw.(map[string]any)
	if !ok {
		return nil, []string{fmt.Sprintf("sinks: want a mapping of sink names to sinks, got %T", raw)}
	}
	var names, problems []string
	for name, spec := range sinks {
		if !sinkNamePattern.MatchString(name) {
			problems = append(problems, fmt.Sprintf("sinks.%s: a sink name is lower-case letters, digits, '-' and '_'", name))
			continue
		}
		if _, ok := spec.(map[string]any); !ok {
			problems = append(problems, fmt.Sprintf("sinks.%s: want a mapping with at least a type, got %T", name, spec))
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	slices.Sort(problems)
	return names, problems
}

// topLevelKeys are the valid keys outside the sinks block.
var topLevelKeys = []string{
	"database.url", "database.schema",
	"relay.batch_size", "relay.lease", "relay.poll_interval", "relay.concurrency",
	"relay.shutdown_timeout", "relay.delete_on_sent", "relay.durable_writes",
	"retention.sent",
	"http.listen", "http.token", "http.allowed_hosts",
	"telemetry.service_name", "telemetry.otlp_endpoint", "telemetry.protocol", "telemetry.link_producer_span",
}

// sinkKeys are the valid keys of one sink, below sinks.<name>. Anything
// below options belongs to the sink type and is checked by its factory.
var sinkKeys = []string{
	"type", "max_attempts", "backoff.initial", "backoff.max",
	"rate_limit.rate", "rate_limit.per", "rate_limit.burst", "max_in_flight",
}

// sinkOptionsKey is the one sink key whose contents are free-form.
const sinkOptionsKey = "options"

func knownKeys(sinkNames []string) []string {
	keys := slices.Clone(topLevelKeys)
	for _, name := range sinkNames {
		for _, k := range sinkKeys {
			keys = append(keys, "sinks."+name+"."+k)
		}
		keys = append(keys, "sinks."+name+"."+sinkOptionsKey)
	}
	return keys
}

// envName is the variable that overrides key: OUTBOX_RELAY_BATCH_SIZE for
// relay.batch_size, OUTBOX_SINKS_OPS_MAIL_MAX_ATTEMPTS for
// sinks.ops-mail.max_attempts.
func envName(key string) string {
	return EnvOverridePrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// applyEnvOverrides sets every known scalar key whose OUTBOX_ variable is
// set. Values are taken literally (no ${} expansion).
func applyEnvOverrides(v *viper.Viper, known []string, env LookupEnv) {
	for _, key := range known {
		if strings.HasSuffix(key, "."+sinkOptionsKey) {
			continue
		}
		if val, ok := env(envName(key)); ok {
			v.Set(key, val)
		}
	}
}

// unknownKeys reports every key that is not a valid one, with the nearest
// valid key as a suggestion.
func unknownKeys(v *viper.Viper, known, sinkNames []string) []string {
	var problems []string
	for _, key := range v.AllKeys() {
		if slices.Contains(known, key) || isSinkOption(key, sinkNames) || isSinkName(key, sinkNames) {
			continue
		}
		msg := fmt.Sprintf("unknown key %s", key)
		if near := nearest(key, known); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
		problems = append(problems, msg)
	}
	slices.Sort(problems)
	return problems
}

func isSinkOption(key string, sinkNames []string) bool {
	for _, name := range sinkNames {
		if strings.HasPrefix(key, "sinks."+name+"."+sinkOptionsKey+".") {
			return true
		}
	}
	return false
}

// isSinkName matches a sink given as a scalar, already reported by sinkNamesOf.
func isSinkName(key string, sinkNames []string) bool {
	name, ok := strings.CutPrefix(key, "sinks.")
	return ok && !strings.Contains(name, ".") && !slices.Contains(sinkNames, name)
}

// validate checks what decoding cannot: ranges, relations and sink types.
func (c *Config) validate() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for key, n := range map[string]int64{
		"relay.batch_size": int64(c.Relay.BatchSize), "relay.concurrency": int64(c.Relay.Concurrency),
		"relay.lease": int64(c.Relay.Lease), "relay.poll_interval": int64(c.Relay.PollInterval),
		"relay.shutdown_timeout": int64(c.Relay.ShutdownTimeout),
		"retention.sent":         int64(c.Retention.Sent),
	} {
		if n < 0 {
			add("%s must not be negative", key)
		}
	}
	switch c.Telemetry.Protocol {
	case "", protocolHTTP, protocolGRPC:
	default:
		add("telemetry.protocol: want %q or %q, got %q", protocolHTTP, protocolGRPC, c.Telemetry.Protocol)
	}
	types := registry.Types()
	for _, name := range slices.Sorted(maps.Keys(c.Sinks)) {
		s := c.Sinks[name]
		at := "sinks." + name
		switch {
		case s.Type == "":
			add("%s.type is missing (registered types: %s)", at, strings.Join(types, ", "))
		case !slices.Contains(types, s.Type):
			add("%s.type: unknown sink type %q (registered types: %s)", at, s.Type, strings.Join(types, ", "))
		}
		if s.MaxAttempts < 0 || s.MaxInFlight < 0 {
			add("%s: max_attempts and max_in_flight must not be negative", at)
		}
		if s.Backoff.Initial < 0 || s.Backoff.Max < s.Backoff.Initial {
			add("%s.backoff: want 0 < initial <= max, got %s and %s", at, s.Backoff.Initial, s.Backoff.Max)
		}
		if rl := s.RateLimit; rl != nil && (rl.Rate <= 0 || rl.Per <= 0 || rl.Burst < 0) {
			add("%s.rate_limit: want rate > 0, per > 0 and burst >= 0, got %d per %s burst %d", at, rl.Rate, rl.Per, rl.Burst)
		}
	}
	return problems
}
