// Package testenv decides what a test does when the machine lacks something
// it needs (a tool such as initdb, Mailpit or Jaeger; a service such as a
// broker): on a developer's machine it skips, naming what is missing; in CI
// (the environment variable CI is set) it fails, because a skip there would
// silently switch a whole suite off.
package testenv

import (
	"os"
	"testing"
)

// CIEnv is the variable whose presence marks a CI run.
const CIEnv = "CI"

// InCI reports whether the tests run in CI.
func InCI() bool {
	_, ci := os.LookupEnv(CIEnv)
	return ci
}

// SkipOrFail skips t with reason, or fails it with reason when running in
// CI, where every tool and service a test needs must be present.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (%s is set: in CI a missing tool or service fails the test instead of skipping it)", reason, CIEnv)
		return
	}
	t.Skip(reason)
}
