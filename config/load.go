package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/viper"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/sinks"
)

// LookupEnv reads one environment variable; os.LookupEnv in the binary, a
// map in tests, so loading never depends on the process environment by
// accident.
type LookupEnv func(name string) (string, bool)

// EnvMap is a LookupEnv over a fixed map, so that a test never touches the
// process environment and can run in parallel.
func EnvMap(m map[string]string) LookupEnv {
	return func(name string) (string, bool) { v, ok := m[name]; return v, ok }
}

// Error lists everything wrong with a configuration, each problem with
// where it is (file:line:column, or the environment variable that set
// it). The binary exits with its configuration exit code when it sees one.
type Error struct {
	File     string
	Problems []string
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "configuration " + e.Problems[0]
	}
	return fmt.Sprintf("configuration %s: %d problems:\n  - %s", DescribeFile(e.File), len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// DescribeFile names a configuration's file in messages: the file, or
// "built-in defaults" for none.
func DescribeFile(file string) string {
	if file == "" {
		return "built-in defaults"
	}
	return file
}

// sinkNamePattern is what a sink name may be. Rows name their sink
// exactly, and viper and the OUTBOX_ overrides ignore case and treat "." as
// the key separator: a name outside this pattern could not be kept intact.
var sinkNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidSinkName reports whether name is what a sink name may be.
func ValidSinkName(name string) bool { return sinkNamePattern.MatchString(name) }

// Load reads the configuration file at path. When path is empty it reads
// OUTBOX_CONFIG or DefaultFile, and a missing default file means the
// built-in defaults; a file named explicitly must exist. secrets are the
// secret values the file holds, also when err is not nil, so that the
// messages of its problems can be scrubbed.
func Load(path string, env LookupEnv) (cfg *Config, secrets []string, err error) {
	explicit := path != ""
	if !explicit {
		if p, ok := env(FileEnv); ok && p != "" {
			path, explicit = p, true
		} else {
			path = DefaultFile
		}
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return parse(nil, "", env)
	case err != nil:
		return nil, nil, &Error{File: path, Problems: []string{fmt.Sprintf("%s: cannot read: %v", path, err)}}
	}
	return parse(data, path, env)
}

// Parse parses, expands, overrides and validates a plugins.yaml held in
// data, builds its sinks (which checks their options) and applies the
// defaults; file names it in messages. The result is the configuration the
// process runs with. Every problem found is reported at once in an *Error.
func Parse(data []byte, file string, env LookupEnv) (*Config, error) {
	cfg, _, err := parse(data, file, env)
	return cfg, err
}

func parse(data []byte, file string, env LookupEnv) (*Config, []string, error) {
	l := &loader{file: file, env: env, overridden: map[string]string{}}
	cfg := l.load(data)
	if len(l.problems) > 0 {
		return nil, l.secrets, l.configError()
	}
	cfg.File, cfg.secrets = file, l.secrets
	return cfg, l.secrets, nil
}

// loader carries one load of a configuration past every problem, so that
// one run reports all of them.
type loader struct {
	file string
	env  LookupEnv
	src  *source
	// overridden maps the keys set by OUTBOX_ variables to the variable.
	overridden map[string]string
	problems   []located
	secrets    []string
	// unexpanded are the keys whose ${VAR} is not set: a sink whose
	// options lack a value for that reason would complain about it, which
	// only repeats the missing variable.
	unexpanded []confschema.Problem
}

// located is a problem and where it is.
type located struct {
	at   position // zero when the problem has no place in the file
	text string
}

func (l *loader) load(data []byte) *Config {
	data, refs, shifts := hideRefs(data)
	src, syntaxErr, at := parseSource(data, shifts)
	if syntaxErr != "" {
		l.problems = append(l.problems, located{at: at, text: syntaxErr})
		return nil
	}
	l.src = src
	options := l.takeSinks(src.tree)
	routes := takeRoutes(src.tree)

	v := viper.New()
	if err := v.MergeConfigMap(src.tree); err != nil {
		l.add(confschema.Problem{Message: err.Error()})
		return nil
	}
	l.applyEnvOverrides(v)
	settings := v.AllSettings()
	for name, opts := range options {
		if sink, ok := sinksOf(settings)[name].(map[string]any); ok {
			sink[sinkOptionsKey] = opts
		}
	}
	if routes != nil {
		settings[routesKey] = routes
	}

	exp := expander{env: l.env, refs: refs}
	settings = exp.expandMap("", settings)
	l.add(exp.missing...)
	l.unexpanded = exp.missing
	l.secrets = secret.Values(settings) // URLs and connection strings: declared ones follow decoding
	l.add(confschema.Unknown(settings, Config{})...)
	cfg := defaultConfig()
	l.add(confschema.Decode(settings, cfg, true)...)
	l.secrets = append(l.secrets, secret.Declared(cfg.declaredSecrets())...)
	l.add(cfg.check()...)
	built := l.buildSinks(cfg)
	l.add(cfg.applyCore(built)...)
	l.add(cfg.compileRoutes()...)
	return cfg
}

// sinkOptionsKey is the one key of a sink whose contents the sink type
// declares.
const sinkOptionsKey = "options"

// takeSinks checks the sink names as written and takes every sink's
// options out of tree, in the case they were written in, for the sink type
// to decode; viper never sees them. A name that is not a valid sink name,
// or a sink that is not a mapping, is reported and removed.
func (l *loader) takeSinks(tree map[string]any) map[string]any {
	key, raw := findKey(tree, "sinks")
	if raw == nil {
		return nil
	}
	entries, ok := raw.(map[string]any)
	if !ok {
		l.add(confschema.Problem{Key: "sinks", Message: "want a mapping of sink names to sinks, got " + describeKind(raw)})
		delete(tree, key)
		return nil
	}
	options := map[string]any{}
	for name, spec := range entries {
		at := "sinks." + name
		fields, isMapping := spec.(map[string]any)
		switch {
		case !sinkNamePattern.MatchString(name) && sinkNamePattern.MatchString(strings.ToLower(name)):
			l.add(confschema.Problem{Key: at, Message: fmt.Sprintf(
				"a sink name is lower case, write %s: rows must name their sink exactly, and OUTBOX_ variables cannot tell %s from %s",
				strings.ToLower(name), name, strings.ToLower(name))})
		case !sinkNamePattern.MatchString(name):
			l.add(confschema.Problem{Key: at, Message: "a sink name is lower-case letters, digits, '-' and '_', at most 63 of them"})
		case !isMapping:
			l.add(confschema.Problem{Key: at, Message: "want a mapping with at least a type, got " + describeKind(spec)})
		default:
			if k, opts := findKey(fields, sinkOptionsKey); k != "" {
				options[name] = opts
				delete(fields, k)
			}
			continue
		}
		delete(entries, name)
	}
	return options
}

// takeRoutes takes the routes block out of tree, in the case it was
// written in (route names, template fields and sample data keep it; viper
// would lower-case them), with targets given as bare sink names expanded.
// Route keys cannot be set by OUTBOX_ variables.
func takeRoutes(tree map[string]any) any {
	key, raw := findKey(tree, routesKey)
	if key == "" {
		return nil
	}
	delete(tree, key)
	if routes, ok := raw.(map[string]any); ok {
		routing.ExpandTargets(routes)
	}
	return raw
}

// findKey returns the key of m that is name in any case, and its value.
func findKey(m map[string]any, name string) (string, any) {
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return k, v
		}
	}
	return "", nil
}

// sinksOf returns the sinks block of settings.
func sinksOf(settings map[string]any) map[string]any {
	m, _ := settings["sinks"].(map[string]any)
	return m
}

func describeKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case nil:
		return "nothing"
	}
	return "a number or boolean"
}

// envName is the variable that overrides key: OUTBOX_RELAY_BATCH_SIZE for
// relay.batch_size, OUTBOX_SINKS_OPS_MAIL_MAX_ATTEMPTS for
// sinks.ops-mail.max_attempts.
func envName(key string) string {
	return EnvOverridePrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// applyEnvOverrides sets every declared key that holds a value and whose
// OUTBOX_ variable is set (a sink's options are not among them). Values are
// taken literally (no ${} expansion).
func (l *loader) applyEnvOverrides(v *viper.Viper) {
	for _, key := range confschema.ValueKeys(v.AllSettings(), Config{}) {
		name := envName(key)
		if val, ok := l.env(name); ok {
			v.Set(key, val)
			l.overridden[key] = name
		}
	}
}

// buildSinks builds every configured sink whose type is registered, and
// reports a missing or unknown type, and each problem of the options, by
// key. It returns the sinks it built.
func (l *loader) buildSinks(cfg *Config) map[string]sink.Sink {
	built := map[string]sink.Sink{}
	types := strings.Join(registry.Types(), ", ")
	for _, name := range slices.Sorted(maps.Keys(cfg.Sinks)) {
		spec, at := cfg.Sinks[name], "sinks."+name
		t, ok := registry.Lookup(spec.Type)
		switch {
		case spec.Type == "":
			l.add(confschema.Problem{Key: at + ".type", Message: "missing: name a registered sink type (" + types + ")"})
			continue
		case !ok:
			l.add(confschema.Problem{Key: at + ".type", Message: fmt.Sprintf("unknown sink type %q (registered types: %s)", spec.Type, types)})
			continue
		}
		sink, err := t.New(name, spec.Options)
		var oe *sinks.OptionsError
		switch {
		case errors.As(err, &oe):
			for _, p := range oe.Problems {
				l.add(p.Under(at + "." + sinkOptionsKey))
			}
		case err != nil && slices.ContainsFunc(l.unexpanded, func(p confschema.Problem) bool { return strings.HasPrefix(p.Key, at+".") }):
			// Most likely the value the missing variable should give, already reported.
		case err != nil:
			l.add(confschema.Problem{Key: at, Message: err.Error()})
		default:
			built[name] = sink
		}
	}
	return built
}

// add records problems with their places: the position of their key in the
// file, or the OUTBOX_ variable that set it.
func (l *loader) add(problems ...confschema.Problem) {
	for _, p := range problems {
		text := p.String()
		if p.Key == "" {
			text = p.Message
		}
		var at position
		if name, ok := l.overridden[strings.ToLower(p.Key)]; ok {
			text += " (set by " + name + ")"
		} else if l.src != nil {
			at, _ = l.src.find(p.Key)
		}
		l.problems = append(l.problems, located{at: at, text: text})
	}
}

// configError lists the problems in the order of the file.
func (l *loader) configError() *Error {
	slices.SortStableFunc(l.problems, func(a, b located) int {
		return cmp.Or(cmp.Compare(a.at.line, b.at.line), cmp.Compare(a.at.col, b.at.col), strings.Compare(a.text, b.text))
	})
	e := &Error{File: l.file}
	for _, p := range l.problems {
		where := DescribeFile(l.file)
		if p.at.line > 0 && l.file != "" {
			where = fmt.Sprintf("%s:%d:%d", l.file, p.at.line, p.at.col)
		}
		e.Problems = append(e.Problems, where+": "+p.text)
	}
	return e
}
