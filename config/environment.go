package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/confschema"
)

// Variables the binary reads under EnvOverridePrefix besides the key
// overrides: the file (FileEnv), the database URL, which the command
// line's --database-url precedence reads before database.url (the
// command's own variables come as Source.Variables).
const (
	configVariable      = "CONFIG"
	databaseURLVariable = "DATABASE_URL"
)

// LookupPrefixed reads the variable suffix under EnvOverridePrefix
// (OUTBOXD_SUFFIX), else under DeprecatedEnvPrefix. warning is not empty
// when the deprecated name gave the value: the caller shows it, once.
func LookupPrefixed(env LookupEnv, suffix string) (value, warning string, ok bool) {
	if v, ok := env(EnvOverridePrefix + suffix); ok {
		return v, "", true
	}
	old := DeprecatedEnvPrefix + suffix
	if v, ok := env(old); ok {
		return v, deprecatedWarning(old, EnvOverridePrefix+suffix), true
	}
	return "", "", false
}

func deprecatedWarning(old, replacement string) string {
	return fmt.Sprintf("environment variable %s is deprecated: rename it %s (%s variables are still read when no %s one is set)",
		old, replacement, DeprecatedEnvPrefix, EnvOverridePrefix)
}

// envName is the variable that overrides key: OUTBOXD_RELAY_BATCH_SIZE
// for relay.batch_size, OUTBOXD_SINKS_OPS_MAIL_MAX_ATTEMPTS for
// sinks.ops-mail.max_attempts.
func envName(key string) string { return EnvOverridePrefix + envSuffix(key) }

func envSuffix(key string) string {
	return strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// unknownVariables warns of each OUTBOXD_ variable of environ (NAME=value
// pairs) that is neither FileEnv, the database URL, one of variables (the
// command's other variables, by purpose) nor the override of one of keys,
// naming the nearest one: a typo's override would otherwise be ignored
// without a word.
func unknownVariables(environ []string, variables map[string]string, keys []string) []string {
	known := map[string]string{FileEnv: "the configuration file", EnvOverridePrefix + databaseURLVariable: "the database URL"}
	maps.Copy(known, variables)
	for _, k := range keys {
		known[envName(k)] = k
	}
	names := slices.Sorted(maps.Keys(known))
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := known[name]; ok || !strings.HasPrefix(name, EnvOverridePrefix) {
			continue
		}
		w := fmt.Sprintf("environment variable %s overrides no configuration key and is ignored", name)
		if near := confschema.Nearest(name, names); near != "" {
			w += fmt.Sprintf(": did you mean %s (%s)?", near, known[near])
		}
		warnings = append(warnings, w)
	}
	slices.Sort(warnings)
	return warnings
}
