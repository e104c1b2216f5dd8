package config

import (
	"cmp"
	"errors"
	"fmt"
	"io"
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
// exactly, and viper and the OUTBOXD_ overrides ignore case and treat "." as
// the key separator: a name outside this pattern could not be kept intact.
var sinkNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidSinkName reports whether name is what a sink name may be.
func ValidSinkName(name string) bool { return sinkNamePattern.MatchString(name) }

// Scope is how much of a configuration a command loads.
type Scope int

const (
	// Everything is what serve runs with, and what config check, enqueue
	// and publish validate: every key, every ${VAR}, every sink built from
	// its options, every route compiled against the built sinks.
	Everything Scope = iota
	// DatabaseOnly is what the operator commands (stats, dlq, get,
	// messages, sinks, audit, migrate, routes apply) need: the database
	// block, the sinks' names, types and policies, the relay and retention
	// blocks and the routes (compiled against their sink types' shapes).
	// The sinks' options, and the http and telemetry blocks, are neither
	// expanded nor checked: an operator runs these commands with the
	// database's URL alone, without the sinks' secrets. A missing default
	// file means the built-in defaults.
	DatabaseOnly
)

// Source says where a configuration is read from.
type Source struct {
	// Path is the file given by --config; with PathGiven false, FileEnv
	// or DefaultFile is read instead. Given explicitly as "" (or as
	// os.DevNull), the built-in defaults apply.
	Path      string
	PathGiven bool
	// Env looks up environment variables: ${VAR} expansion and the
	// OUTBOXD_ overrides.
	Env LookupEnv
	// Environ is the environment as NAME=value pairs (os.Environ), to
	// warn of OUTBOXD_ variables that override no key; nil skips that.
	Environ []string
	// Sink, under DatabaseOnly, is one sink whose options are loaded
	// (their ${VAR}s expanded and checked) and which is built, as under
	// Everything: `outboxd sinks test NAME` needs that sink's secrets
	// only.
	Sink string
	// Variables are the other OUTBOXD_ variables the command reads, each
	// with what it is for (destinations.EnvSecretsKey, ...): they are not
	// configuration keys, and draw no "overrides no key" warning.
	Variables map[string]string
	// Resources are what the process shares with the sinks it builds
	// (sink.Env.Resources), for a process that publishes some. The rest of
	// the sinks' environment is the process's logger and OpenTelemetry's
	// global providers, which follow what a serving process installs once
	// it has loaded its configuration (see registry.Define).
	Resources sink.Resources
}

// Loaded is a configuration as a command runs with it.
type Loaded struct {
	Config *Config
	// Secrets are the secret values the file holds, also when loading
	// failed, so that the messages of its problems can be scrubbed.
	Secrets []string
	// Warnings are what is suspicious but not wrong (a deprecated or
	// unknown variable), also when loading failed: the command prints
	// them.
	Warnings []string
}

// Load reads the configuration src names, to the extent scope says. A file
// named explicitly (--config, FileEnv) must exist. Under Everything, a
// missing default file, or a file that holds nothing, is an error unless
// --config was given as "" or os.DevNull: a configuration mount that went
// missing must not pass config check nor start a relay with no sinks.
func Load(src Source, scope Scope) (Loaded, error) {
	path, explicit := src.Path, src.PathGiven
	var warnings []string
	if !explicit {
		if p, warning, ok := LookupPrefixed(src.Env, configVariable); ok && p != "" {
			path, explicit = p, true
			warnings = appendNonEmpty(warnings, warning)
		} else {
			path = DefaultFile
		}
	}
	l := &loader{file: path, env: src.Env, environ: src.Environ, variables: src.Variables, scope: scope, onlySink: src.Sink,
		sinkEnv: sink.Env{Resources: src.Resources}, overridden: map[string]string{}, warnings: warnings}
	if explicit && (path == "" || path == os.DevNull) {
		l.file = ""
		return l.result(nil)
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit && scope == DatabaseOnly:
		l.file = ""
		return l.result(nil)
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return l.fail(fmt.Sprintf(
			"%s: no configuration file: looked for --config, $%s (or $%s) and ./%s; give --config '' to run with the built-in defaults",
			path, FileEnv, DeprecatedEnvPrefix+configVariable, DefaultFile))
	case err != nil:
		return l.fail(fmt.Sprintf("%s: cannot read: %v", path, err))
	}
	l.refuseEmpty = scope == Everything
	return l.result(data)
}

func appendNonEmpty(list []string, s string) []string {
	if s == "" {
		return list
	}
	return append(list, s)
}

// Parse parses, expands, overrides and validates a plugins.yaml held in
// data, builds its sinks (which checks their options) and applies the
// defaults; file names it in messages. The result is the configuration the
// process runs with. Every problem found is reported at once in an *Error.
func Parse(data []byte, file string, env LookupEnv) (*Config, error) {
	l := &loader{file: file, env: env, scope: Everything, overridden: map[string]string{}}
	loaded, err := l.result(data)
	return loaded.Config, err
}

// result loads data and returns the configuration, or every problem.
func (l *loader) result(data []byte) (Loaded, error) {
	cfg := l.load(data)
	if len(l.problems) > 0 {
		return Loaded{Secrets: l.secrets, Warnings: l.warnings}, l.configError()
	}
	cfg.File, cfg.secrets = l.file, l.secrets
	return Loaded{Config: cfg, Secrets: l.secrets, Warnings: l.warnings}, nil
}

// fail is a load that found the file itself wrong.
func (l *loader) fail(problem string) (Loaded, error) {
	return Loaded{Warnings: l.warnings}, &Error{File: l.file, Problems: []string{problem}}
}

// loader carries one load of a configuration past every problem, so that
// one run reports all of them.
type loader struct {
	file    string
	env     LookupEnv
	environ []string
	// variables: Source.Variables.
	variables map[string]string
	scope     Scope
	// onlySink is Source.Sink.
	onlySink string
	sinkEnv  sink.Env
	src      *source
	// overridden maps the keys set by OUTBOXD_ variables to the variable.
	overridden map[string]string
	problems   []located
	secrets    []string
	warnings   []string
	// refuseEmpty makes a file without keys a problem (a mount that went
	// empty), as Load does for Everything.
	refuseEmpty bool
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
	if l.refuseEmpty && len(src.tree) == 0 {
		l.problems = append(l.problems, located{text: "is empty (no keys): a configuration has at least a sinks block; give --config '' to run with the built-in defaults"})
		return nil
	}
	options := l.takeSinks(src.tree)
	routes := takeRoutes(src.tree)

	v := viper.New()
	if err := v.MergeConfigMap(src.tree); err != nil {
		l.add(confschema.Problem{Message: err.Error()})
		return nil
	}
	l.applyEnvOverrides(v)
	settings := v.AllSettings()
	l.warnings = append(l.warnings, unknownVariables(l.environ, l.variables, confschema.ValueKeys(settings, Config{}))...)
	if l.scope == DatabaseOnly {
		// What the operator commands do not use is left out before
		// expansion: its ${VAR}s (the sinks' secrets) need not be set.
		delete(settings, "http")
		delete(settings, "telemetry")
		options = keptOptions(options, settings, l.onlySink)
	}
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
	problems, warnings := cfg.applyDestinationNetwork(built)
	l.add(problems...)
	l.warnings = append(l.warnings, warnings...)
	l.add(cfg.compileRoutes(l.scope)...)
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
				"a sink name is lower case, write %s: rows must name their sink exactly, and OUTBOXD_ variables cannot tell %s from %s",
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
// Route keys cannot be set by OUTBOXD_ variables.
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

// applyEnvOverrides sets every declared key that holds a value and whose
// OUTBOXD_ variable (or deprecated OUTBOX_ one) is set (a sink's options
// are not among them). Values are taken literally (no ${} expansion).
func (l *loader) applyEnvOverrides(v *viper.Viper) {
	for _, key := range confschema.ValueKeys(v.AllSettings(), Config{}) {
		if val, warning, ok := LookupPrefixed(l.env, envSuffix(key)); ok {
			v.Set(key, val)
			l.overridden[key] = envName(key)
			if warning != "" {
				l.overridden[key] = DeprecatedEnvPrefix + envSuffix(key)
				l.warnings = append(l.warnings, warning)
			}
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
			l.add(confschema.Problem{Key: at + ".type", Message: unknownType(spec.Type, types)})
			continue
		case l.scope == DatabaseOnly && name != l.onlySink && !deliversToDestinations(t):
			continue // the options were left out: nothing to build
		}
		if s := l.buildSink(name, t, spec.Options); s != nil {
			built[name] = s
		}
	}
	return built
}

// unknownType is the problem of a sink type nothing registered: the
// nearest registered type when one is close, as for keys, and all of them.
func unknownType(typ, types string) string {
	if near := confschema.Nearest(typ, registry.Types()); near != "" {
		return fmt.Sprintf("unknown sink type %q (did you mean %s? registered types: %s)", typ, near, types)
	}
	return fmt.Sprintf("unknown sink type %q (registered types: %s)", typ, types)
}

// buildSink builds the sink name of type t from options and reports its
// problems, by key; it returns nil when the sink cannot be built. When the
// options have problems of their own (an unknown key, a value of the wrong
// type), the constructor would not run, and what it checks (a URL's
// scheme) would only be reported once they are fixed: so it runs again on
// the options without the faulty keys (which keep their defaults), that
// one run reports everything. The sink built that way is only a check,
// closed at once.
func (l *loader) buildSink(name string, t registry.Type, options map[string]any) sink.Sink {
	at := "sinks." + name
	s, err := t.New(name, options, l.sinkEnv)
	var oe *registry.OptionsError
	if !errors.As(err, &oe) {
		if err != nil {
			l.addBuildError(at, err, nil)
		}
		return s
	}
	faulty := map[string]bool{}
	for _, p := range oe.Problems {
		// An option whose typo was named counts as faulty too: that it is
		// missing is the same problem.
		faulty[optionOf(p.Key)], faulty[optionOf(p.Suggestion)] = true, true
		p = p.Under(at + "." + sinkOptionsKey)
		// A value the missing variable should have given (an empty string
		// where a number goes) is reported already.
		if !slices.ContainsFunc(l.unexpanded, func(u confschema.Problem) bool { return u.Key == p.Key }) {
			l.add(p)
		}
	}
	rest := maps.Clone(options)
	maps.DeleteFunc(rest, func(k string, _ any) bool { return faulty[optionOf(k)] })
	check, err := t.New(name, rest, l.sinkEnv)
	if err != nil && !errors.As(err, &oe) {
		l.addBuildError(at, err, faulty)
	}
	if c, ok := check.(io.Closer); ok {
		_ = c.Close() // built only to check the options; it delivered nothing
	}
	return nil
}

// constructorOption is how a sink type's constructor names the option it
// refuses: "option url: scheme must be http or https".
var constructorOption = regexp.MustCompile(`^option ([A-Za-z0-9_]+(?:\[[0-9]+\])?): (.*)$`)

// addBuildError reports err, a sink's constructor's refusal, at the option
// it names (or at the sink), unless that option is among settled: its
// problem is reported already. A sink whose ${VAR} is not set most likely
// fails for that reason, also reported already.
func (l *loader) addBuildError(at string, err error, settled map[string]bool) {
	if slices.ContainsFunc(l.unexpanded, func(p confschema.Problem) bool { return strings.HasPrefix(p.Key, at+".") }) {
		return
	}
	m := constructorOption.FindStringSubmatch(err.Error())
	switch {
	case m == nil:
		l.add(confschema.Problem{Key: at, Message: err.Error()})
	case !settled[optionOf(m[1])]:
		l.add(confschema.Problem{Key: at + "." + sinkOptionsKey + "." + m[1], Message: m[2]})
	}
}

// optionOf is the option (lower-cased, as keys are compared) a key below
// a sink's options block is about: headers for headers.X-Key, ports for
// ports[0].
func optionOf(key string) string {
	if i := strings.IndexAny(key, ".["); i >= 0 {
		key = key[:i]
	}
	return strings.ToLower(key)
}

// add records problems with their places: the position of their key in the
// file, or the OUTBOXD_ variable that set it.
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
