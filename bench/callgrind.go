package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// callgrindGoDebug turns Go's asynchronous preemption off in a child run
// under callgrind: its preemption signal (SIGURG), sent while callgrind
// handles another, trips callgrind's assertion on signal nesting and
// ends the run. Goroutines still yield at function calls.
const callgrindGoDebug = "GODEBUG=asyncpreemptoff=1"

// callgrindCommand is the command that runs a relay child under callgrind,
// writing its counts to out. Only instructions are counted (no cache
// simulation): a count repeats from run to run whatever else the machine
// does, where CPU time and wall time do not.
func callgrindCommand(out string) []string {
	return []string{"valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, "--log-file=" + out + ".log"}
}

// callgrindInstructions reads the instructions executed (Ir) from the
// "summary:" line of a callgrind output file.
func callgrindInstructions(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("callgrind output: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("callgrind output %s: summary %q: %w", path, v, err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("callgrind output %s: %w", path, err)
	}
	return 0, fmt.Errorf("callgrind output %s: no summary line (did the child exit cleanly?)", path)
}

// serverCPUTicks is the CPU time (user+system, clock ticks) of every
// process of the PostgreSQL server whose data directory is data: the
// postmaster (its pid is postmaster.pid's first line) and its children,
// the backends and the background processes, those alive now. A backend
// that exited in between is missed: callers compare readings taken while
// the same relays' connections are open.
func serverCPUTicks(data string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	postmaster := strings.TrimSpace(first)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	var ticks int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // exited meanwhile
		}
		// Fields after the command name (which may hold spaces) start at state.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if e.Name() != postmaster && f[1] != postmaster { // f[1]: the parent's pid
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return ticks, nil
}
