package testenv

import (
	"os"
	"testing"
)

// recorder is the part of a test SkipOrFail calls, remembering what it did.
type recorder struct {
	testing.TB
	failed, skipped bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Skip(...any)           { r.skipped = true }

func TestSkipOrFailFailsInCIAndSkipsElsewhere(t *testing.T) {
	t.Setenv(CIEnv, "true")
	var r recorder
	SkipOrFail(&r, "no initdb")
	if !r.failed || r.skipped {
		t.Fatalf("with %s set: failed %v, skipped %v; want a failure", CIEnv, r.failed, r.skipped)
	}

	t.Setenv(CIEnv, "") // restores the variable when the test ends
	if err := os.Unsetenv(CIEnv); err != nil {
		t.Fatal(err)
	}
	r = recorder{}
	SkipOrFail(&r, "no initdb")
	if r.failed || !r.skipped {
		t.Fatalf("without %s: failed %v, skipped %v; want a skip", CIEnv, r.failed, r.skipped)
	}
}
