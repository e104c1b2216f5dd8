package confschema

import (
	"reflect"
	"strings"
)

// Struct tags of a declaration.
const (
	// tagName names a key: the decoder's own tag, so decoding needs no
	// second declaration.
	tagName = "mapstructure"
	// tagDoc holds the key's one line of documentation.
	tagDoc = "doc"
	// tagDefaultDoc describes the default in the documentation when it is
	// not a plain value.
	tagDefaultDoc = "defaultdoc"
)

// shape is how a key's value is laid out; see the package documentation.
type shape int

const (
	shapeValue       shape = iota // a value: string, number, list of values, ...
	shapeMapping                  // struct or *struct: declared keys
	shapeEntries                  // map[string]struct: named entries of declared keys
	shapeItems                    // []struct: a list of mappings of declared keys
	shapeFreeMapping              // map[string]T: keys chosen by the user
)

// shapeOf returns t's shape and, for the shapes that hold declared keys,
// the struct type declaring them.
func shapeOf(t reflect.Type) (shape, reflect.Type) {
	switch t.Kind() {
	case reflect.Struct:
		return shapeMapping, t
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Struct {
			return shapeMapping, t.Elem()
		}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Struct {
			return shapeEntries, t.Elem()
		}
		return shapeFreeMapping, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return shapeItems, t.Elem()
		}
	}
	return shapeValue, nil
}

// field is one declared key of a struct.
type field struct {
	name  string
	index []int // for reflect.Value.FieldByIndex, through squashed structs
	sf    reflect.StructField
	// remain marks a ",remain" field, which takes every undeclared key.
	remain bool
}

// fieldsOf returns the keys t declares, in declaration order, with the
// fields of ",squash" embedded structs in place.
func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get(tagName), ",")
		if name == "-" {
			continue
		}
		if hasOption(opts, "squash") && sf.Type.Kind() == reflect.Struct {
			for _, inner := range fieldsOf(sf.Type) {
				inner.index = append([]int{i}, inner.index...)
				out = append(out, inner)
			}
			continue
		}
		if name == "" {
			name = sf.Name // the decoder's own rule for untagged fields
		}
		out = append(out, field{name: name, index: []int{i}, sf: sf, remain: hasOption(opts, "remain")})
	}
	return out
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// lookup finds the field named key, matching case-insensitively as the
// decoder does.
func lookup(fields []field, key string) (field, bool) {
	for _, f := range fields {
		if !f.remain && strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return field{}, false
}

// takesAnyKey reports whether a ",remain" field collects undeclared keys.
func takesAnyKey(fields []field) bool {
	for _, f := range fields {
		if f.remain {
			return true
		}
	}
	return false
}

// structType returns the struct type of decl: a struct, or a pointer to one.
func structType(decl any) reflect.Type {
	t := reflect.TypeOf(decl)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		panic("confschema: a declaration is a struct, got " + t.String())
	}
	return t
}

// Join appends key to the key path prefix.
func Join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// Walk calls visit for every declared key of v, a pointer to a declaring
// struct, in declaration order: with the key's path, its struct field and
// its value (settable). For a key holding a mapping of declared keys (a
// struct or a non-nil *struct), visit returns whether to go on with that
// mapping's keys. Map entries and list items are not visited.
func Walk(v any, visit func(key string, field reflect.StructField, value reflect.Value) (descend bool)) {
	walk("", reflect.ValueOf(v).Elem(), visit)
}

func walk(prefix string, v reflect.Value, visit func(string, reflect.StructField, reflect.Value) bool) {
	for _, f := range fieldsOf(v.Type()) {
		key := Join(prefix, f.name)
		fv := v.FieldByIndex(f.index)
		if !visit(key, f.sf, fv) {
			continue
		}
		if fv.Kind() == reflect.Pointer && !fv.IsNil() {
			fv = fv.Elem()
		}
		if fv.Kind() == reflect.Struct {
			walk(key, fv, visit)
		}
	}
}
