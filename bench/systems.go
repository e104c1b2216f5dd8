package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
)

// system is one contender: outboxd with its defaults, or River configured
// one way. Both River configurations share one database.
type system struct {
	name    string // as given to -systems and to the relay subcommand
	label   string // column header
	river   bool
	bare    bool          // the bare claim/finish loop on outboxd's table (see bareloop.go)
	workers int           // River MaxWorkers
	fetch   time.Duration // River FetchCooldown (0: River's default)
	poll    time.Duration // River FetchPollInterval (0: River's default)
}

var (
	sysOutboxd      = system{name: "outboxd", label: "outboxd"}
	sysRiverTuned   = system{name: "river-tuned", label: "River tuned", river: true, workers: riverTunedWorkers, fetch: riverTunedCooldown, poll: riverTunedPoll}
	sysRiverDefault = system{name: "river-default", label: "River defaults", river: true, workers: riverDefaultWorkers}
	allSystems      = []system{sysOutboxd, sysRiverTuned, sysRiverDefault}
	// sysBare is the burn-down's limit: it runs there only, beside outboxd.
	sysBare = system{name: "bare-loop", label: "bare loop (limit)", bare: true}
)

// Databases of the two engines; each is dropped and created by the run.
const (
	dbOutboxd = "bench_outboxd"
	dbRiver   = "bench_river"
)

func (s system) database() string {
	if s.river {
		return dbRiver
	}
	return dbOutboxd
}

func systemByName(name string) (system, bool) {
	for _, s := range append(allSystems, sysBare) {
		if s.name == name {
			return s, true
		}
	}
	return system{}, false
}

// noopSink is the sink name outboxd rows carry and River's job kind.
const noopSink = "noop"

// noopArgs is the River job: the payload both systems carry is {"n": i}.
type noopArgs struct {
	N   int    `json:"n"`
	Pad string `json:"pad,omitempty"` // see padding
}

func (noopArgs) Kind() string { return noopSink }

// noopWorker records the job and returns at once, like outboxd's no-op sink.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	rec *recorder
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	w.rec.add(job.ID)
	return nil
}

// quietLogger keeps both systems' logs to warnings and errors, on stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
