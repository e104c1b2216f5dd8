package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The instruction count is the "summary:" line's, not the "totals:" one
// nor an event line's (a file of callgrind 3.19's layout, cut short).
// (Mutation: reading the "pid:" line instead fails this test with 42;
// seen.)
func TestCallgrindInstructionsReadsTheSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "callgrind.out")
	const file = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 42\ncmd:  ./bench\npart: 1\n\npositions: line\nevents: Ir\nsummary: 7057144\n\nfl=(1) ???\nfn=(1) main\n12 345\ntotals: 7057144\n"
	if err := os.WriteFile(out, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := callgrindInstructions(out)
	if err != nil || n != 7057144 {
		t.Fatalf("callgrindInstructions = %d, %v; want 7057144", n, err)
	}
	if err := os.WriteFile(out, []byte("events: Ir\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := callgrindInstructions(out); err == nil {
		t.Fatal("a file without a summary line was read as a count")
	}
}
