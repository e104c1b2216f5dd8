package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestDestinationRoutesDeclareTheirRole: every destinations endpoint
// names a role of the team roles, and every one that changes something
// needs operate, so the roles middleware can take the table as it is.
//
// Mutation: declaring PATCH .../{id} with role read fails it.
func TestDestinationRoutesDeclareTheirRole(t *testing.T) {
	t.Parallel()
	for _, rt := range destinationRoutes {
		method, _, _ := strings.Cut(rt.pattern, " ")
		want := "operate"
		if method == http.MethodGet {
			want = "read"
		}
		if rt.role != want {
			t.Errorf("%s: role %q, want %q", rt.pattern, rt.role, want)
		}
	}
}
