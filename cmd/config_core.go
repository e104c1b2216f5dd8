package cmd

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core"
)

// coreTag, on a key's field, names the core.Config (or, on a SinkSpec
// field, core.SinkConfig) field the key feeds. The two fields have the same
// type but for struct tags, so one converts into the other.
const coreTag = "core"

// relayConfig is the core.Config the configuration describes: every key
// with a core tag, and the built sinks. The caller adds the logger and the
// telemetry providers.
func (c *Config) relayConfig() core.Config {
	var rc core.Config
	toCore(&rc, c)
	rc.Sinks = c.sinks
	return rc
}

// applyCore hands the keys core owns to core.Config.Effective, takes the
// effective values back (so that `config show` prints what the relay
// runs with), and returns core's complaints as problems naming their keys.
// built holds the sinks that could be built; the policies of the others
// are checked all the same.
func (c *Config) applyCore(built map[string]core.Sink) []confschema.Problem {
	var rc core.Config
	toCore(&rc, c)
	names := slices.Sorted(maps.Keys(c.Sinks))
	for _, name := range names {
		spec := c.Sinks[name]
		sc := core.SinkConfig{Name: name, Type: spec.Type, Sink: built[name]}
		toCore(&sc, &spec)
		rc.Sinks = append(rc.Sinks, sc)
	}
	eff, err := rc.Effective()
	fromCore(c, eff)
	for i, name := range names {
		spec := c.Sinks[name]
		fromCore(&spec, eff.Sinks[i])
		c.Sinks[name] = spec
	}
	c.sinks = eff.Sinks
	return c.coreProblems(err)
}

// coreProblems turns the *core.FieldErrors joined in err into problems
// naming the keys of the fields.
func (c *Config) coreProblems(err error) []confschema.Problem {
	if err == nil {
		return nil
	}
	var problems []confschema.Problem
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *core.FieldError
		if !errors.As(e, &fe) {
			problems = append(problems, confschema.Problem{Message: e.Error()})
			continue
		}
		p := confschema.Problem{Key: keyOfCoreField(c, fe.Field), Message: fe.Err.Error()}
		if fe.Sink != "" {
			spec := c.Sinks[fe.Sink]
			p = confschema.Problem{Key: keyOfCoreField(&spec, fe.Field), Message: p.Message}.Under("sinks." + fe.Sink)
		}
		problems = append(problems, p)
	}
	return problems
}

// toCore sets each field of the core struct dst (a pointer) from the field
// of src (a pointer to a declaring struct) whose core tag names it.
func toCore(dst, src any) {
	d := reflect.ValueOf(dst).Elem()
	confschema.Walk(src, func(_ string, f reflect.StructField, v reflect.Value) bool {
		name, ok := f.Tag.Lookup(coreTag)
		if ok {
			target := d.FieldByName(name)
			target.Set(v.Convert(target.Type()))
		}
		return !ok
	})
}

// fromCore is toCore the other way round: it sets each core-tagged field of
// dst (a pointer to a declaring struct) from src, a core struct.
func fromCore(dst, src any) {
	s := reflect.ValueOf(src)
	confschema.Walk(dst, func(_ string, f reflect.StructField, v reflect.Value) bool {
		name, ok := f.Tag.Lookup(coreTag)
		if ok {
			v.Set(s.FieldByName(name).Convert(v.Type()))
		}
		return !ok
	})
}

// keyOfCoreField returns the key of decl (a pointer to a declaring struct)
// that feeds the core field path ("Backoff", "RateLimit.Per"): the key
// tagged with the path's first part, then the sub-keys of the same Go
// names.
func keyOfCoreField(decl any, path string) string {
	first, rest, _ := strings.Cut(path, ".")
	var key string
	var t reflect.Type
	confschema.Walk(decl, func(k string, f reflect.StructField, _ reflect.Value) bool {
		if name, ok := f.Tag.Lookup(coreTag); ok && name == first && key == "" {
			key, t = k, f.Type
		}
		return true
	})
	for part := range strings.SplitSeq(rest, ".") {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if part == "" || t == nil || t.Kind() != reflect.Struct {
			break
		}
		sf, ok := t.FieldByName(part)
		if !ok {
			break
		}
		name, _, _ := strings.Cut(sf.Tag.Get("mapstructure"), ",")
		key, t = confschema.Join(key, name), sf.Type
	}
	return key
}
