package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// metric is one row of the result table.
type metric struct {
	scenario string
	name     string
	unit     string // decides the number format
}

// Table rows, in print order.
var (
	mBurn1        = metric{"1 burn-down", "1 relay (msg/s)", "rate"}
	mBurn2        = metric{"1 burn-down", "2 relays (msg/s)", "rate"}
	mWAL1         = metric{"1 burn-down", "WAL per message, 1 relay (bytes)", "count"}
	mWAL2         = metric{"1 burn-down", "WAL per message, 2 relays (bytes)", "count"}
	mLatP50       = metric{"2 latency", "p50 (ms)", "ms"}
	mLatP99       = metric{"2 latency", "p99 (ms)", "ms"}
	mLatMax       = metric{"2 latency", "max (ms)", "ms"}
	mLoad500P50   = metric{"2b latency at 500 msg/s", "p50 (ms)", "ms"}
	mLoad500P99   = metric{"2b latency at 500 msg/s", "p99 (ms)", "ms"}
	mLoad500Max   = metric{"2b latency at 500 msg/s", "max (ms)", "ms"}
	mLoad2000P50  = metric{"2c latency at 2,000 msg/s", "p50 (ms)", "ms"}
	mLoad2000P99  = metric{"2c latency at 2,000 msg/s", "p99 (ms)", "ms"}
	mLoad2000Max  = metric{"2c latency at 2,000 msg/s", "max (ms)", "ms"}
	mEnq1         = metric{"3 enqueue", "1-msg tx, 1 conn (msg/s)", "rate"}
	mEnq8         = metric{"3 enqueue", "1-msg tx, 8 conns (msg/s)", "rate"}
	mEnqBatch     = metric{"3 enqueue", "batches of 1,000 (msg/s)", "rate"}
	mSteadyStart  = metric{"4 steady state", "claim at start (ms)", "ms"}
	mSteadyEnd    = metric{"4 steady state", "claim at end (ms)", "ms"}
	mSteadyGrowth = metric{"4 steady state", "claim end/start", "x"}
	mSteadyTable  = metric{"4 steady state", "table at end (MB)", "mb"}
	mSteadyLag    = metric{"4 steady state", "backlog at end (msgs)", "count"}
	mHist0        = metric{"5 history", "claim per 1,000 rows, empty (ms)", "ms"}
	mHist1        = metric{"5 history", "claim per 1,000 rows, with history (ms)", "ms"}
	mHistRatio    = metric{"5 history", "with/empty", "x"}
	mIdleQ        = metric{"6 idle", "statements/s per relay", "qps"}
	mIdleX        = metric{"6 idle", "pg_stat_database xact/s per relay", "qps"}
	mRSS          = metric{"7 memory", "peak RSS, 1 relay (MB)", "mb"}
	mRSSLatency   = metric{"7 memory", "peak RSS, latency (MB)", "mb"}
	mWait0        = metric{"8 claims beside waiting rows", "claim per 1,000 rows, empty (ms)", "ms"}
	mWait1        = metric{"8 claims beside waiting rows", "claim per 1,000 rows, beside the waiting rows (ms)", "ms"}
	mWaitRatio    = metric{"8 claims beside waiting rows", "beside/empty", "x"}
	mWaitP50a     = metric{"8 claims beside waiting rows", "claim p50, empty (ms)", "ms"}
	mWaitP50b     = metric{"8 claims beside waiting rows", "claim p50, beside the waiting rows (ms)", "ms"}
	mCostInstr    = metric{"12 cost per message", "relay instructions (callgrind)", "count"}
	mCostServer   = metric{"12 cost per message", "server CPU (µs)", "us"}
	mCostWAL      = metric{"12 cost per message", "WAL (bytes)", "count"}
	allMetrics    = []metric{mBurn1, mBurn2, mWAL1, mWAL2, mLatP50, mLatP99, mLatMax,
		mLoad500P50, mLoad500P99, mLoad500Max, mLoad2000P50, mLoad2000P99, mLoad2000Max, mEnq1, mEnq8, mEnqBatch,
		mSteadyStart, mSteadyEnd, mSteadyGrowth, mSteadyTable, mSteadyLag, mHist0, mHist1, mHistRatio, mIdleQ, mIdleX, mRSS, mRSSLatency,
		mWait0, mWait1, mWaitRatio, mWaitP50a, mWaitP50b, mCostInstr, mCostServer, mCostWAL}
)

// Reference measurements without any framework, printed under the table.
const (
	refRawInsert = "raw 1,000-row multi-row INSERT into outboxd's table (msg/s)"
	refRawCopy   = "raw COPY of 1,000 rows into outboxd's table (msg/s)"
)

// results gathers every run's values; the table shows medians.
type results struct {
	vals    map[metric]map[string][]float64
	refs    map[string][]float64
	notes   []string
	details map[string]string // the last run's breakdown, by scenario and system
	// sections are the tables of scenarios that do not fit the metric
	// table (phases, steps, samples over time), in the order they ran.
	sections []string
}

func newResults() *results {
	return &results{vals: map[metric]map[string][]float64{}, refs: map[string][]float64{}, details: map[string]string{}}
}

func (r *results) add(m metric, sys string, v float64) {
	if r.vals[m] == nil {
		r.vals[m] = map[string][]float64{}
	}
	r.vals[m][sys] = append(r.vals[m][sys], v)
}

func (r *results) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *results) med(m metric, sys string) float64 { return median(r.vals[m][sys]) }

// print writes the Markdown table, the references, the breakdowns and notes.
func (r *results) print(w io.Writer) {
	if len(r.vals) > 0 {
		r.printMetrics(w)
	}
	r.printRest(w)
}

// printMetrics writes the table of medians and ratios.
func (r *results) printMetrics(w io.Writer) {
	fmt.Fprintln(w, "| scenario | metric | outboxd | River tuned | River defaults | bare loop (limit) | outboxd ÷ tuned | outboxd ÷ defaults | outboxd ÷ limit |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, m := range allMetrics {
		if r.vals[m] == nil {
			continue
		}
		o, t, d := r.med(m, sysOutboxd.name), r.med(m, sysRiverTuned.name), r.med(m, sysRiverDefault.name)
		l := r.med(m, sysBare.name)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.scenario, m.name,
			format(m.unit, o), format(m.unit, t), format(m.unit, d), format(m.unit, l),
			format("x", o/t), format("x", o/d), format("x", o/l))
	}
}

// printRest writes the references, the sections, the breakdowns and notes.
func (r *results) printRest(w io.Writer) {
	if len(r.refs) > 0 {
		fmt.Fprintln(w)
		names := make([]string, 0, len(r.refs))
		for n := range r.refs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(w, "- %s: %s\n", n, format("rate", median(r.refs[n])))
		}
		if raw := median(r.refs[refRawInsert]); !math.IsNaN(raw) {
			fmt.Fprintf(w, "- outboxd batch enqueue ÷ raw multi-row INSERT: %s\n", format("x", r.med(mEnqBatch, sysOutboxd.name)/raw))
		}
	}
	for _, sec := range r.sections {
		fmt.Fprintln(w)
		fmt.Fprint(w, sec)
	}
	if len(r.details) > 0 {
		fmt.Fprintln(w, "\nBreakdown (last run):")
		keys := make([]string, 0, len(r.details))
		for k := range r.details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "- %s: %s\n", k, r.details[k])
		}
	}
	if len(r.notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range r.notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
}

func format(unit string, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	switch unit {
	case "rate":
		if v >= 1000 {
			return fmt.Sprintf("%.1fk", v/1000)
		}
		return fmt.Sprintf("%.0f", v)
	case "ms":
		return fmt.Sprintf("%.2f", v)
	case "x":
		return fmt.Sprintf("%.2f×", v)
	case "mb":
		return fmt.Sprintf("%.1f", v)
	case "qps":
		return fmt.Sprintf("%.2f", v)
	case "us":
		return fmt.Sprintf("%.1f", v)
	default:
		return strings.TrimSuffix(fmt.Sprintf("%.0f", v), ".")
	}
}

// passFail is a target's verdict column.
func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}
