package sinktest_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that keeps what sinktest reports instead of
// failing a test: the kit's own tests read its verdicts on sinks that
// break the contract, and the example prints them. It has the methods
// the kit and the harnesses here call; the embedded TB is nil, so any
// other one panics.
type recorder struct {
	testing.TB

	mu       sync.Mutex
	lines    []string // logs, and failures marked FAIL, in order
	failed   bool
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(format string, args ...any) { r.add(false, fmt.Sprintf(format, args...)) }

func (r *recorder) Errorf(format string, args ...any) { r.add(true, fmt.Sprintf(format, args...)) }

func (r *recorder) Error(args ...any) { r.add(true, fmt.Sprint(args...)) }

// Fatalf ends the calling goroutine, as testing's does: sinktest runs
// each check on a goroutine of its own for a TB that is not a *testing.T.
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) add(failure bool, line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if failure {
		r.failed, line = true, "FAIL: "+line
	}
	r.lines = append(r.lines, line)
}

// finish runs the cleanups, last registered first, as a test's end
// does, and returns every line recorded.
func (r *recorder) finish() []string {
	r.mu.Lock()
	cleanups := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for _, f := range slices.Backward(cleanups) {
		f()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// failures returns the failures recorded, without their mark.
func (r *recorder) failures() []string {
	var out []string
	for _, l := range r.finish() {
		if f, ok := strings.CutPrefix(l, "FAIL: "); ok {
			out = append(out, f)
		}
	}
	return out
}
