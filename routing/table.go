package routing

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/sink"
)

// routeNamePattern keeps route names to what reads well in a row's
// dedup key (type/key/route): no "/", no spaces.
var routeNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// Table is a configuration's routes, checked and compiled: what Apply
// stores for publish() and what Wrap renders rows with.
type Table struct {
	shapes    map[string]sink.Shape // of the relay's sinks, by name
	unmatched string
	routes    []*route // by name
	targets   map[targetID]*target
}

type route struct {
	name     string
	patterns []string
	matcher  *matcher
	targets  []*target
	sample   sink.Event
}

// targetID names a target: a route has at most one per sink.
type targetID struct{ route, sink string }

type target struct {
	targetID
	position   int
	template   map[string]string
	updateRoot bool
	threadKey  []threadPart
	tenant     []threadPart
	compiled   *compiled
	// digest is the target's digest policy and digestTemplate its digest
	// template, nil for none.
	digest         *sink.DigestPolicy
	digestTemplate *compiled
	// fallback is the target's fallback, nil for none.
	fallback *fallback
}

// Compile checks cfg against the configured sinks (by name), parses every
// template and renders it with its route's sample event (declared, or
// generated from the route's patterns and the fields its templates read),
// so that a typo fails at load, not at delivery. It returns every problem found, each at
// its plugins.yaml key and naming route, sink and the template's line.
//
// A nil sink in sinks is a configured sink that failed to build (a
// missing secret, a wrong option): its own problem is reported where it
// was built, so its targets are not checked for what the sink can do
// (threads, tenants, digests), which would only blame the route for it.
func Compile(cfg Config, sinks map[string]sink.Sink) (*Table, []confschema.Problem) {
	return CompileUnbuilt(cfg, sinks, nil)
}

// CompileUnbuilt is Compile where the templates of a sink that failed to
// build (nil in sinks) are checked against typeShapes[name], the payload
// shape of its type, as CompileShapes checks them: a wrong option of the
// sink does not hide a wrong field of its routes' templates until the
// option is fixed.
func CompileUnbuilt(cfg Config, sinks map[string]sink.Sink, typeShapes map[string]sink.Shape) (*Table, []confschema.Problem) {
	shapes := make(map[string]sink.Shape, len(sinks))
	for name, s := range sinks {
		shapes[name] = shapeOf(s)
		if s == nil {
			shapes[name] = typeShapes[name]
		}
	}
	return compileTable(cfg, shapes, sinks)
}

// CompileShapes is Compile against sinks known only by their payloads'
// shapes, by name: what a command that does not build the sinks (they need
// their secrets) compiles routes with before it applies them. The Table's
// Stage renders for such sinks as for built ones.
func CompileShapes(cfg Config, shapes map[string]sink.Shape) (*Table, []confschema.Problem) {
	return compileTable(cfg, shapes, nil)
}

// compileTable is Compile and CompileShapes: with sinks (nil for
// CompileShapes, which has none to ask), a target's digest also needs its
// sink to deliver digests.
func compileTable(cfg Config, shapes map[string]sink.Shape, sinks map[string]sink.Sink) (*Table, []confschema.Problem) {
	t := &Table{shapes: shapes, unmatched: cfg.Unmatched, targets: map[targetID]*target{}}
	var ps problems
	switch t.unmatched {
	case "":
		t.unmatched = UnmatchedError
	case UnmatchedError, UnmatchedDrop:
	default:
		ps.add("routes_unmatched", "want %q or %q, got %q", UnmatchedError, UnmatchedDrop, t.unmatched)
	}
	// unbuilt are the sinks that failed to build (see Compile): what they
	// can do is unknown.
	unbuilt := map[string]bool{}
	for name, s := range sinks {
		unbuilt[name] = s == nil
	}
	for _, name := range sortedRoutes(cfg) {
		if r := compileRoute(name, cfg.Routes[name], t.shapes, unbuilt, &ps); r != nil {
			t.routes = append(t.routes, r)
			for _, tg := range r.targets {
				t.targets[tg.targetID] = tg
				if tg.fallback != nil {
					// Rendered by the stage as the fallback sink's target;
					// not applied: publish() creates no row for it.
					t.targets[tg.fallback.standIn.targetID] = tg.fallback.standIn
				}
				if _, ok := sinks[tg.sink].(sink.DigestSink); sinks != nil && !unbuilt[tg.sink] && tg.digest != nil && !ok {
					ps.add(fmt.Sprintf("routes.%s.%s[%d].%s", name, keyTo, tg.position, keyDigest),
						"route %s, sink %s: this sink type cannot deliver digests", name, tg.sink)
				}
			}
		}
	}
	return t, ps
}

func compileRoute(name string, cfg Route, shapes map[string]sink.Shape, unbuilt map[string]bool, ps *problems) *route {
	at := "routes." + name
	if !routeNamePattern.MatchString(name) {
		ps.add(at, "a route name is letters, digits, '_', '-' and '.', starting with a letter or digit, at most 63")
		return nil
	}
	before := len(*ps)
	r := &route{name: name, patterns: cfg.Events}
	if len(cfg.Events) == 0 {
		ps.add(at+"."+keyEvents, "is required: a list of event types or patterns (order.*, **)")
	}
	m, err := newMatcher(cfg.Events)
	if err != nil {
		ps.add(at+"."+keyEvents, "%v", err)
	}
	r.matcher = m
	if len(cfg.To) == 0 {
		ps.add(at+"."+keyTo, "is required: a list of sink names or {sink, template} mappings")
	}
	for i, tc := range cfg.To {
		if tg := compileTarget(fmt.Sprintf("%s.%s[%d]", at, keyTo, i), name, i, tc, shapes, unbuilt[tc.Sink], r.targets, ps); tg != nil {
			r.targets = append(r.targets, tg)
		}
	}
	checkFallbackTargets(at, name, r.targets, ps)
	if len(*ps) > before || m == nil || len(cfg.Events) == 0 {
		return r
	}
	r.sample = sampleOf(at, r, cfg.Sample, ps)
	for i, tg := range r.targets {
		if fb := tg.fallback; fb != nil {
			if _, err := fb.standIn.compiled.render(r.sample); err != nil {
				ps.add(fmt.Sprintf("%s.%s[%d].%s.%s", at, keyTo, i, keyFallback, keyTemplate),
					"route %s, sink %s: rendering the sample event %s/%s: %v", name, fb.standIn.sink, r.sample.Type, r.sample.Key, err)
			}
		}
		if _, err := tg.compiled.render(r.sample); err != nil {
			key := fmt.Sprintf("%s.%s[%d].%s", at, keyTo, i, keyTemplate)
			var re *renderError
			if errors.As(err, &re) {
				key += "." + re.field
			}
			ps.add(key, "route %s, sink %s: rendering the sample event %s/%s: %v", name, tg.sink, r.sample.Type, r.sample.Key, err)
		}
		if tg.digestTemplate == nil {
			continue
		}
		data, err := digestData([]sink.Event{r.sample, r.sample})
		if err == nil {
			_, err = tg.digestTemplate.renderData(data)
		}
		if err != nil {
			key := fmt.Sprintf("%s.%s[%d].%s.%s", at, keyTo, i, keyDigest, keyDigestTemplate)
			var re *renderError
			if errors.As(err, &re) {
				key += "." + re.field
			}
			ps.add(key, "route %s, sink %s: rendering a digest of the sample event %s/%s: %v", name, tg.sink, r.sample.Type, r.sample.Key, err)
		}
	}
	return r
}

// compileTarget compiles the target tc of route routeName; unbuilt says
// its sink failed to build, so its capabilities are not checked.
func compileTarget(at, routeName string, position int, tc Target, shapes map[string]sink.Shape, unbuilt bool, earlier []*target, ps *problems) *target {
	shape, known := shapes[tc.Sink]
	if !known {
		ps.add(at+"."+keySink, "route %s: no sink named %q is configured", routeName, tc.Sink)
		return nil
	}
	if slices.ContainsFunc(earlier, func(e *target) bool { return e.sink == tc.Sink }) {
		ps.add(at, "route %s targets sink %s twice; a second message to the same sink takes a route of its own", routeName, tc.Sink)
		return nil
	}
	if tc.UpdateRoot && !shape.Threads && !unbuilt {
		ps.add(at+"."+keyUpdateRoot, "route %s, sink %s: this sink does not post in threads", routeName, tc.Sink)
	}
	tg := &target{targetID: targetID{routeName, tc.Sink}, position: position, template: tc.Template, updateRoot: tc.UpdateRoot}
	if text, ok := tc.Template[FieldThreadKey]; ok {
		parts, err := parseThreadKey(text)
		if err != nil {
			ps.add(at+"."+keyTemplate+"."+FieldThreadKey, "route %s, sink %s: %v", routeName, tc.Sink, err)
		}
		tg.threadKey = parts
	}
	switch {
	case tc.Tenant != "" && !shape.Tenants && !unbuilt:
		ps.add(at+"."+keyTenant, "route %s, sink %s: only a sink of type destinations delivers to a tenant", routeName, tc.Sink)
	case tc.Tenant == "" && shape.Tenants:
		ps.add(at, "route %s, sink %s: a destinations sink needs the target's tenant (tenant: \"{{.data.account_id}}\")", routeName, tc.Sink)
	case tc.Tenant != "":
		parts, err := parseKeyTemplate(keyTenant, tc.Tenant)
		if err != nil {
			ps.add(at+"."+keyTenant, "route %s, sink %s: %v", routeName, tc.Sink, err)
		}
		tg.tenant = parts
	}
	c, errs := compile(tc.Template, shape, tc.UpdateRoot)
	ps.addFieldErrors(at+"."+keyTemplate, routeName, tc.Sink, errs)
	tg.compiled = c
	if tc.Digest != nil {
		compileDigest(at, routeName, tc, shape, tg, ps)
	}
	compileFallback(at, routeName, tc, tg, shapes, earlier, ps)
	return tg
}

// sampleOf returns the route's declared sample event, checked, or a
// generated one.
func sampleOf(at string, r *route, s *Sample, ps *problems) sink.Event {
	if s == nil {
		var templates []*compiled
		var threadKeys [][]threadPart
		for _, tg := range r.targets {
			templates, threadKeys = append(templates, tg.compiled), append(threadKeys, tg.threadKey)
			if tg.fallback != nil {
				templates = append(templates, tg.fallback.standIn.compiled)
			}
		}
		return generatedSample(r.patterns, templates, threadKeys)
	}
	at += "." + keySample
	ev := sink.Event{Type: s.Type, Key: s.Key, CreatedAt: sampleCreatedAt}
	if err := checkEventType(s.Type); err != nil {
		ps.add(at+".type", "%v", err)
	} else if !r.matcher.Match(s.Type) {
		ps.add(at+".type", "%q does not match the route's events %v", s.Type, r.patterns)
	}
	if ev.Key == "" {
		ev.Key = sampleKey
	}
	data := s.Data
	if data == nil {
		data = map[string]any{}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		ps.add(at+".data", "cannot be encoded as JSON: %v", err)
	}
	ev.Data = raw
	return ev
}

// Unmatched is what publish() does with an event no route matches.
func (t *Table) Unmatched() string { return t.unmatched }

// Routes returns the route names, sorted.
func (t *Table) Routes() []string {
	names := make([]string, len(t.routes))
	for i, r := range t.routes {
		names[i] = r.name
	}
	return names
}

// Match returns the sinks an event of type typ goes to, one per matching
// target, in the order publish() creates their rows (by route name, then
// by the target's place in its route).
func (t *Table) Match(typ string) []string {
	var sinks []string
	for _, r := range t.routes {
		if r.matcher != nil && r.matcher.Match(typ) {
			for _, tg := range r.targets {
				sinks = append(sinks, tg.sink)
			}
		}
	}
	return sinks
}

// appliedTarget is one target as apply_routes() (migration 003) stores it.
type appliedTarget struct {
	Route      string            `json:"route"`
	Sink       string            `json:"sink"`
	Position   int               `json:"position"`
	Patterns   []string          `json:"patterns"`
	ThreadKey  []threadPart      `json:"thread_key,omitempty"`
	Template   map[string]string `json:"template,omitempty"`
	UpdateRoot bool              `json:"update_root"`
	Tenant     []threadPart      `json:"tenant,omitempty"`
}

// applied lists the table's targets for apply_routes().
func (t *Table) applied() []appliedTarget {
	out := []appliedTarget{}
	for _, r := range t.routes {
		for _, tg := range r.targets {
			out = append(out, appliedTarget{Route: r.name, Sink: tg.sink, Position: tg.position,
				Patterns: r.matcher.regexps, ThreadKey: tg.threadKey, Template: tg.template, UpdateRoot: tg.updateRoot, Tenant: tg.tenant})
		}
	}
	return out
}

// Digest identifies the routes: equal digests mean routes that publish()
// and the relay treat alike (map keys are encoded sorted, so the digest
// does not depend on the order plugins.yaml lists them in).
func (t *Table) Digest() string {
	b, _ := json.Marshal(struct {
		Unmatched string          `json:"unmatched"`
		Targets   []appliedTarget `json:"targets"`
	}{t.unmatched, t.applied()}) // strings, numbers and bools only
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
