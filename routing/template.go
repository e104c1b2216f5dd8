package routing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"io"
	"maps"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/outboxd/outboxd/core/sink"
)

// missingKeyError makes a template fail on a key .data lacks instead of
// printing "<no value>" into a message.
const missingKeyError = "missingkey=error"

// compiled is a target's template, parsed and checked, ready to render.
type compiled struct {
	fields     []compiledField // by name
	shape      sink.Shape
	updateRoot bool
}

// compiledField is one field of a template.
type compiledField struct {
	name string
	kind sink.FieldKind
	exec func(w io.Writer, data any) error
	tree *parse.Tree // for a generated sample's fields
}

// fieldError is a problem with one field of a template (field "" for the
// template as a whole).
type fieldError struct {
	field string
	err   error
}

// compile parses tmpl's fields (all but FieldThreadKey) for a sink of
// shape; an empty tmpl renders the event in the shape's untemplated form.
func compile(tmpl map[string]string, shape sink.Shape, updateRoot bool) (*compiled, []fieldError) {
	c := &compiled{shape: shape, updateRoot: updateRoot}
	var errs []fieldError
	hasBody := false
	for _, name := range slices.Sorted(maps.Keys(tmpl)) {
		if name == FieldThreadKey {
			continue
		}
		kind, ok := fieldKind(shape, name)
		if !ok {
			errs = append(errs, fieldError{name, fmt.Errorf("not a field of this sink's payload (want one of %s, or %s)",
				strings.Join(slices.Sorted(maps.Keys(shape.Fields)), ", "), FieldThreadKey)})
			continue
		}
		f, err := parseField(name, kind, tmpl[name])
		if err != nil {
			errs = append(errs, fieldError{name, err})
			continue
		}
		hasBody = hasBody || kind == sink.Body
		c.fields = append(c.fields, f)
	}
	if hasBody && len(c.fields) > 1 {
		errs = append(errs, fieldError{"", errors.New("a body template is the whole payload: it takes no other field beside it")})
	}
	if len(shape.OneOf) > 0 && !slices.ContainsFunc(shape.OneOf, func(f string) bool { _, set := tmpl[f]; return set }) {
		errs = append(errs, fieldError{"", fmt.Errorf("this sink needs a template setting %s", strings.Join(shape.OneOf, " or "))})
	}
	return c, errs
}

// parseField parses one field's template with the function set and
// missingkey=error.
func parseField(name string, kind sink.FieldKind, text string) (compiledField, error) {
	f := compiledField{name: name, kind: kind}
	if kind == sink.HTML {
		t, err := htmltemplate.New(name).Option(missingKeyError).Funcs(funcs).Parse(text)
		if err != nil {
			return f, err
		}
		f.exec, f.tree = t.Execute, t.Tree
		return f, nil
	}
	t, err := template.New(name).Option(missingKeyError).Funcs(funcs).Parse(text)
	if err != nil {
		return f, err
	}
	f.exec, f.tree = t.Execute, t.Tree
	return f, nil
}

// templateData is what a template sees: .type, .key, .data (numbers kept
// exactly as published) and .created_at.
func templateData(ev sink.Event) (map[string]any, error) {
	var data any
	if len(ev.Data) > 0 {
		dec := json.NewDecoder(bytes.NewReader(ev.Data))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return nil, fmt.Errorf("the event's data is not JSON: %w", err)
		}
	}
	return map[string]any{"type": ev.Type, "key": ev.Key, "data": data, "created_at": ev.CreatedAt}, nil
}

// render renders ev into the sink's payload. A failure (a key the event
// lacks, JSON that is not JSON) is the template's, and retrying cannot
// change it.
func (c *compiled) render(ev sink.Event) (json.RawMessage, error) {
	if len(c.fields) == 0 {
		return c.untemplated(ev)
	}
	data, err := templateData(ev)
	if err != nil {
		return nil, err
	}
	return c.renderData(data)
}

// renderData renders the template's fields with data (an event's, or a
// digest's) into the sink's payload.
func (c *compiled) renderData(data map[string]any) (json.RawMessage, error) {
	payload := make(map[string]any, len(c.fields)+1)
	var buf bytes.Buffer
	for _, f := range c.fields {
		buf.Reset()
		if err := f.exec(&buf, data); err != nil {
			return nil, &renderError{field: f.name, err: err}
		}
		switch f.kind {
		case sink.Body:
			if !json.Valid(buf.Bytes()) {
				return nil, &renderError{field: f.name, err: invalidJSON(f.name, buf.Bytes())}
			}
			return bytes.Clone(buf.Bytes()), nil
		case sink.JSON:
			if !json.Valid(buf.Bytes()) {
				return nil, &renderError{field: f.name, err: invalidJSON(f.name, buf.Bytes())}
			}
			payload[f.name] = json.RawMessage(bytes.Clone(buf.Bytes()))
		case sink.List:
			var list []string
			for _, item := range strings.Split(buf.String(), ",") {
				if item = strings.TrimSpace(item); item != "" {
					list = append(list, item)
				}
			}
			if len(list) > 0 {
				payload[f.name] = list
			}
		default:
			if buf.Len() > 0 {
				payload[f.name] = buf.String()
			}
		}
	}
	if c.updateRoot && c.shape.Threads {
		payload[PayloadUpdateRoot] = true
	}
	return marshal(payload)
}

// marshal encodes v as JSON without escaping <, > and & (the sinks' own
// encoders read them either way, and receivers' eyes read them better).
func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// untemplated is the payload of a target without a template.
func (c *compiled) untemplated(ev sink.Event) (json.RawMessage, error) {
	if c.shape.Untemplated != nil {
		return c.shape.Untemplated(ev)
	}
	return marshal(ev)
}

// renderError is a template field's failure to render.
type renderError struct {
	field string
	err   error
}

func (e *renderError) Error() string { return e.err.Error() }
func (e *renderError) Unwrap() error { return e.err }

// invalidJSON describes why field's output is not JSON, with the offset
// when known.
func invalidJSON(field string, out []byte) error {
	var v any
	err := json.Unmarshal(out, &v)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Errorf("template %s did not produce valid JSON: %v (at byte %d of %d)", field, syntax, syntax.Offset, len(out))
	}
	return fmt.Errorf("template %s did not produce valid JSON: %v", field, err)
}
