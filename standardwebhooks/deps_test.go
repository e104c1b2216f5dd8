package standardwebhooks_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyTheStandardLibrary keeps the package neutral: a sender or
// receiver that imports it gets no dependency beyond Go's own. (Mutation:
// an import of internal/safetext in verify.go fails this test.)
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const self = "github.com/outboxd/outboxd/standardwebhooks"
	for _, dep := range strings.Fields(string(out)) {
		if dep != self {
			t.Errorf("package standardwebhooks links %s, outside the standard library", dep)
		}
	}
}
