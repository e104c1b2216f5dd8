package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/destinations"
)

// EventTypeSpec is one entry of event_types: an event type the operator
// declares for tenants to subscribe to (the portal's catalog,
// GET /v1/tenants/{tenant}/event-types, docs/destinations.md "Event
// types").
type EventTypeSpec struct {
	Name        string `mapstructure:"name" defaultdoc:"required" doc:"the event type, as producers publish it (invoice.paid)"`
	Description string `mapstructure:"description" doc:"what the event says, in the tenant's words"`
	Example     any    `mapstructure:"example" defaultdoc:"required" doc:"an example of the event's data, which a test event of this type carries"`
	Schema      any    `mapstructure:"schema" defaultdoc:"none" doc:"a JSON Schema of the event's data; example must validate against it"`
}

// eventTypesKey is the key of the catalog in plugins.yaml.
const eventTypesKey = "event_types"

// schemaResource is where an event type's schema is compiled from: a
// name only, never fetched.
const schemaResource = "outboxd:event-type-schema.json"

// EventTypes returns the catalog of event types a tenant may subscribe
// to: the ones event_types declares, in order, then outboxd's own
// operational events about the tenant's endpoints.
func (c *Config) EventTypes() destinations.Catalog {
	return append(append(destinations.Catalog{}, c.eventTypes...), destinations.OperationalEventTypes()...)
}

// checkEventTypes reports, at their keys, an entry without a name, a
// name declared twice or taken by outboxd's own events, an example
// missing or not valid against the entry's schema, and a schema that does
// not compile; it keeps the valid entries as the catalog.
func (c *Config) checkEventTypes() []confschema.Problem {
	var problems []confschema.Problem
	c.eventTypes = nil
	seen := map[string]bool{}
	for _, t := range destinations.OperationalEventTypes() {
		seen[t.Name] = true
	}
	for i, spec := range c.EventTypeSpecs {
		at := func(field string) string { return fmt.Sprintf("%s[%d].%s", eventTypesKey, i, field) }
		name := strings.TrimSpace(spec.Name)
		if name == "" || strings.ContainsAny(name, "* \t") {
			problems = append(problems, confschema.Problem{Key: at("name"), Message: fmt.Sprintf("want an event type such as invoice.paid (no spaces or wildcards), got %q", spec.Name)})
			continue
		}
		if seen[name] {
			problems = append(problems, confschema.Problem{Key: at("name"), Message: fmt.Sprintf("%q is declared twice, or is one of outboxd's own event types", name)})
			continue
		}
		seen[name] = true
		et, problem := eventType(name, spec)
		if problem != nil {
			problem.Key = at(problem.Key)
			problems = append(problems, *problem)
			continue
		}
		c.eventTypes = append(c.eventTypes, et)
	}
	return problems
}

// eventType is spec as the catalog holds it, its example checked against
// its schema; a problem's Key is the field it is about.
func eventType(name string, spec EventTypeSpec) (destinations.EventType, *confschema.Problem) {
	et := destinations.EventType{Name: name, Description: strings.TrimSpace(spec.Description)}
	if spec.Example == nil {
		return et, &confschema.Problem{Key: "example", Message: "required: an example of the event's data, which the portal shows and a test event sends"}
	}
	var err error
	if et.Example, err = json.Marshal(spec.Example); err != nil {
		return et, &confschema.Problem{Key: "example", Message: fmt.Sprintf("cannot be written as JSON: %v", err)}
	}
	if spec.Schema == nil {
		return et, nil
	}
	if et.Schema, err = json.Marshal(spec.Schema); err != nil {
		return et, &confschema.Problem{Key: "schema", Message: fmt.Sprintf("cannot be written as JSON: %v", err)}
	}
	schema, err := compileSchema(et.Schema)
	if err != nil {
		return et, &confschema.Problem{Key: "schema", Message: fmt.Sprintf("is not a JSON Schema: %v", err)}
	}
	example, err := jsonschema.UnmarshalJSON(bytes.NewReader(et.Example))
	if err == nil {
		err = schema.Validate(example)
	}
	if err != nil {
		return et, &confschema.Problem{Key: "example", Message: fmt.Sprintf("does not validate against the schema: %v", err)}
	}
	return et, nil
}

// errNoFetch refuses a schema's $ref to anything but itself: a
// configuration is checked without reaching any other address.
var errNoFetch = errors.New("a schema is read from plugins.yaml alone: $ref to another document is not followed")

// compileSchema compiles the JSON Schema doc, following no reference
// outside it.
func compileSchema(doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaResource, v); err != nil {
		return nil, err
	}
	return c.Compile(schemaResource)
}

// refuseLoader loads no URL (errNoFetch).
type refuseLoader struct{}

func (refuseLoader) Load(string) (any, error) { return nil, errNoFetch }
