package main

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// relayProc is one relay child as the parent sees it.
type relayProc struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	out      string
	ready    chan struct{}
	exited   chan struct{}
	progress atomic.Int64
}

// relayOpts says how to start relay children.
type relayOpts struct {
	sys     system
	count   int // processes
	expect  int // deliveries expected per process (preallocation)
	profile string

	pausedSink bool          // also configure pausedSinkName
	retention  time.Duration // delivered rows' retention (0: the system's default)
	countOnly  bool          // count deliveries, record none (the soak)
	// callgrind runs the first child under valgrind's callgrind, which
	// writes its instruction counts to this file when the child exits
	// (see callgrindInstructions).
	callgrind string
	// tolerateExits lets drive return a session in which a relay stopped
	// on its own (see relayRun.exits); otherwise that fails the session.
	tolerateExits bool
}

// startRelays starts opts.count relay children of opts.sys and waits until
// each is connected and ready; nothing is claimed before goRelays.
func (b *bench) startRelays(o relayOpts) ([]*relayProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var procs []*relayProc
	for i := range o.count {
		out := filepath.Join(b.tmp, fmt.Sprintf("relay-%d.gob", i))
		args := []string{"-system", o.sys.name, "-url", b.dbURL(o.sys.database()),
			"-out", out, "-expect", strconv.Itoa(o.expect)}
		if o.profile != "" && i == 0 {
			args = append(args, "-cpuprofile", o.profile)
		}
		if o.sys.bare {
			args = append(args, "-async-commit=true") // like outboxd's relay by default
		}
		args = append(args, "-paused-sink="+strconv.FormatBool(o.pausedSink), "-retention", o.retention.String(),
			"-count-only="+strconv.FormatBool(o.countOnly))
		if !o.sys.river && !o.sys.bare {
			args = append(args, "-batch", strconv.Itoa(b.relayBatch), "-concurrency", strconv.Itoa(b.relayConcurrency),
				"-async-commit="+strconv.FormatBool(b.relayAsyncCommit), "-delete-on-sent="+strconv.FormatBool(b.relayDeleteSent))
		}
		var wrap []string
		if o.callgrind != "" && i == 0 {
			wrap = callgrindCommand(o.callgrind)
		}
		p, err := spawnRelay(exe, out, args, wrap)
		if err != nil {
			stopRelays(procs)
			return nil, err
		}
		procs = append(procs, p)
	}
	readyWithin := relayReadyWithin
	if o.callgrind != "" {
		readyWithin = callgrindReadyWithin
	}
	for _, p := range procs {
		select {
		case <-p.ready:
		case <-p.exited:
			stopRelays(procs)
			return nil, fmt.Errorf("relay %s exited before it was ready", o.sys.name)
		case <-time.After(readyWithin):
			stopRelays(procs)
			return nil, fmt.Errorf("relay %s not ready after %s", o.sys.name, readyWithin)
		}
	}
	return procs, nil
}

// relayReadyWithin bounds a relay child's start; callgrindReadyWithin one
// under callgrind, which runs it some fifty times slower.
const (
	relayReadyWithin     = 30 * time.Second
	callgrindReadyWithin = 5 * time.Minute
)

// spawnRelay starts a relay child with args, through the command wrap
// (nil: none) when given.
func spawnRelay(exe, out string, args, wrap []string) (*relayProc, error) {
	argv := append(append(slices.Clone(wrap), exe), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	if len(wrap) > 0 {
		cmd.Env = append(cmd.Env, callgrindGoDebug)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &relayProc{cmd: cmd, stdin: stdin, out: out, ready: make(chan struct{}), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start relay: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if line == msgReady {
				close(p.ready)
			} else if n, ok := strings.CutPrefix(line, msgProgress+" "); ok {
				v, _ := strconv.ParseInt(n, 10, 64)
				p.progress.Store(v)
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// goRelays lets every child start its relay and returns when that was.
func goRelays(procs []*relayProc) int64 {
	at := time.Now().UnixNano()
	for _, p := range procs {
		fmt.Fprintln(p.stdin, msgGo)
	}
	return at
}

// delivered sums the children's last reported delivery counts.
func delivered(procs []*relayProc) int64 {
	var n int64
	for _, p := range procs {
		n += p.progress.Load()
	}
	return n
}

// waitDelivered polls the children's progress until n deliveries were made.
func waitDelivered(procs []*relayProc, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for delivered(procs) < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d delivered after %s", delivered(procs), n, timeout)
		}
		time.Sleep(progressEvery)
	}
	return nil
}

// collectRelays stops every child gracefully and reads their reports.
func collectRelays(procs []*relayProc) ([]childReport, error) {
	for _, p := range procs {
		fmt.Fprintln(p.stdin, msgStop)
	}
	var reports []childReport
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(60 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			return nil, fmt.Errorf("relay pid %d did not stop within 60s", p.cmd.Process.Pid)
		}
		if !p.cmd.ProcessState.Success() {
			return nil, fmt.Errorf("relay pid %d failed: %s", p.cmd.Process.Pid, p.cmd.ProcessState)
		}
		var r childReport
		if err := readReport(p.out, &r); err != nil {
			return nil, err
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// stopRelays ends children after a failure, without reading reports.
func stopRelays(procs []*relayProc) {
	for _, p := range procs {
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func readReport(path string, r *childReport) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("relay report: %w", err)
	}
	defer f.Close()
	if err := gob.NewDecoder(f).Decode(r); err != nil {
		return fmt.Errorf("relay report %s: %w", path, err)
	}
	return nil
}

// peakRSS reads the peak resident set size (VmHWM) of a live process, in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// clockTicksPerSecond is the unit of /proc's CPU times (USER_HZ), which
// Linux fixes at 100 for user space whatever the kernel's own tick rate.
const clockTicksPerSecond = 100

// procCPUTicks is a process's user+system CPU time in clock ticks.
func procCPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at state.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime, nil
}

// machineCPUTicks returns the busy and total CPU ticks of the whole machine.
func machineCPUTicks() (busy, total int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}
