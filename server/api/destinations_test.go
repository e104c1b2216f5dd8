package api

import (
	"net/http"
	"testing"

	"github.com/outboxd/outboxd/internal/access"
)

// TestDestinationRoutesDeclareTheirRole: every destinations endpoint
// names a role of the team roles, and every one that changes something
// needs operate (the routes are registered through allow with these roles).
//
// Mutation: declaring PATCH .../{id} with role read fails it.
func TestDestinationRoutesDeclareTheirRole(t *testing.T) {
	t.Parallel()
	for _, rt := range destinationEndpoints {
		want := access.RoleOperate
		if rt.method == http.MethodGet {
			want = access.RoleRead
		}
		if rt.role != want {
			t.Errorf("%s %s: role %q, want %q", rt.method, rt.path, rt.role, want)
		}
	}
}
