package proc

import (
	"strings"
	"testing"
)

// StopLogTail is how many lines of its log StopAll shows of a server that
// did not stop cleanly.
const StopLogTail = 40

// StopAll stops servers gracefully (Stop), one after another, and fails t
// for each that did not exit cleanly, with the tail of its log. stopped,
// when not nil, is called with each server's index once it is down: a
// test that records how long each of its relays lived reads the time
// there.
func StopAll(t testing.TB, servers []*Server, stopped func(i int)) {
	t.Helper()
	for i, s := range servers {
		if err := s.Stop(); err != nil {
			t.Errorf("outboxd serve (pid %d) did not stop cleanly: %v\n%s", s.Pid(), err, Tail(s.Logs(), StopLogTail))
		}
		if stopped != nil {
			stopped(i)
		}
	}
}

// Tail is the last lines of text (all of it when it has fewer).
func Tail(text string, lines int) string {
	all := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
