package config

import (
	"strings"
	"testing"
)

// TestFallbackProblemsNameTheirLine: a fallback_after that is not a
// duration, and a duration on a sink whose circuit breaker is off (the
// duration counts from the breaker's opening, so the fallback would never
// be used), are each reported at their file:line:col; dead on that sink is
// fine.
// (Mutation: compileRoutes without checkFallbackBreakers fails this test.)
func TestFallbackProblemsNameTheirLine(t *testing.T) {
	t.Parallel()
	doc := `sinks:
  a: {type: log, circuit_breaker: {enabled: false}}
  b: {type: log}
  c: {type: log}
  d: {type: log}
routes:
  r:
    events: [x.*]
    to:
      - {sink: a, fallback: b, fallback_after: 10m}
      - {sink: c, fallback_after: soon, fallback: d}
  s:
    events: [y.*]
    to:
      - {sink: a, fallback: c, fallback_after: dead}
`
	problems := problemsOf(t, doc, nil)
	want := []string{
		"p.yaml:10:", "routes.r.to[0].fallback_after: route r, sink a: a duration counts from the opening of the sink's circuit breaker, which is off",
		"p.yaml:11:", `routes.r.to[1].fallback_after: route r, sink c: want a duration (10m) or dead, got "soon"`,
	}
	if len(problems) != 2 {
		t.Fatalf("problems %q, want 2", problems)
	}
	for i, p := range problems {
		if !strings.HasPrefix(p, want[2*i]) || !strings.Contains(p, want[2*i+1]) {
			t.Errorf("problem %d: %q, want %s... %s", i, p, want[2*i], want[2*i+1])
		}
	}
}
