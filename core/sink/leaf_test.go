package sink_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// otelAPI are the packages outside the standard library that the contract
// may import, as its package doc says: OpenTelemetry's trace and metric
// APIs, for the providers of Env.
var otelAPI = []string{"go.opentelemetry.io/otel/metric", "go.opentelemetry.io/otel/trace"}

// TestTheContractIsALeaf keeps the package doc true: a sink author who
// imports the contract gets nothing of outboxd and, beyond Go's own
// packages, only the two OpenTelemetry APIs. (Mutation: an import of
// go.opentelemetry.io/otel, the global providers, in env.go fails this
// test.)
func TestTheContractIsALeaf(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imported := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(imported, "/")
		if strings.Contains(first, ".") && !slices.Contains(otelAPI, imported) {
			t.Errorf("package sink imports %s: only the standard library and %s may be", imported, strings.Join(otelAPI, ", "))
		}
	}
}
