package nobrokers

import (
	"reflect"
	"slices"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
)

// Every type whose sinks declare a shape registers that same shape:
// commands that compile routes without building sinks (outboxd migrate)
// check them against the registered one. The types are built with their
// default options; those that need more (a URL, a token) are covered by
// their own package's shape tests.
// Mutation: registering the destinations type without its Shape (migrate
// refused a route with a tenant) makes this fail.
func TestRegisteredShapeIsTheSinksShape(t *testing.T) {
	t.Parallel()
	built := 0
	for _, typ := range Types() {
		s, err := typ.New("shape-check", nil, sink.Env{})
		if err != nil {
			continue
		}
		built++
		sh, ok := s.(sink.Shaper)
		if !ok {
			continue
		}
		if got := sh.TemplateShape(); !sameShape(got, typ.Shape) {
			t.Errorf("type %s registers the shape %+v, its sinks declare %+v", typ.Name, typ.Shape, got)
		}
	}
	if built == 0 {
		t.Fatal("no type builds with its default options: the test checks nothing")
	}
}

// sameShape compares two shapes; of Untemplated, a function, only whether
// it is set.
func sameShape(a, b sink.Shape) bool {
	return reflect.DeepEqual(a.Fields, b.Fields) && slices.Equal(a.OneOf, b.OneOf) && a.Threads == b.Threads &&
		a.Tenants == b.Tenants && (a.Untemplated == nil) == (b.Untemplated == nil)
}
