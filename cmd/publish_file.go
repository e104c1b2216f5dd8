package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/server/jsonl"
)

// publishFileBatchSize is how many events of `outboxd publish --file` go
// into one publish_batch() call (one transaction).
const publishFileBatchSize = 500

// publishFile publishes the JSON lines of file in two passes, as `enqueue
// --file` enqueues, so that a bad line never leaves the file half
// published. The first pass reads each line and has the database check
// every batch, publishing it in a transaction it rolls back: a bad event or
// one no route matches stops the run with exit code 2, naming its line,
// and nothing is stored. The second pass publishes the batches, each
// committing on its own, printing one line per row.
func (a *app) publishFile(ctx context.Context, cmd *cobra.Command, s session, file string) error {
	in, size, closeIn, err := a.openInput(file)
	if err != nil {
		return err
	}
	defer closeIn()
	first, again, err := replayable(in)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	defer again.Close()

	check := &eventBatch{file: file, publish: func(events []outboxd.Event) ([][]outboxd.Published, error) {
		var published [][]outboxd.Published
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			if published, err = s.ob.PublishBatch(ctx, tx, events); err == nil {
				err = errDryRun // roll back: this pass only checks
			}
			return err
		})
		if errors.Is(err, errDryRun) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("%w (nothing was published)", err)
		}
		return published, err
	}}
	if err := eachLine(first, file, newProgressBar(a.io.Err, size, "check"), check.add); err != nil {
		return err
	}
	if err := check.flush(); err != nil {
		return err
	}

	out := cmd.OutOrStdout()
	store := &eventBatch{file: file, publish: func(events []outboxd.Event) ([][]outboxd.Published, error) {
		published, err := s.ob.PublishBatch(ctx, s.pool, events)
		for i, rows := range published {
			printPublished(out, events[i], rows)
		}
		return published, err
	}}
	err = eachLine(again, file, newProgressBar(a.io.Err, size, "publish"), store.add)
	if err == nil {
		err = store.flush()
	}
	if err != nil {
		fmt.Fprintln(out, "stopped by an error; rerunning the file is safe")
	}
	return err
}

// errDryRun rolls back the first pass's transactions.
var errDryRun = errors.New("dry run")

// eventBatch collects the events of a file's lines into publish calls.
type eventBatch struct {
	file    string
	publish func([]outboxd.Event) ([][]outboxd.Published, error)
	events  []outboxd.Event
	lines   []int // the line of each event
}

// add reads one line into the batch, publishing the batch when it is full.
func (b *eventBatch) add(lineNo int, line []byte) error {
	var e jsonl.Event
	err := jsonl.Decode(bytes.NewReader(line), &e)
	if err == nil {
		err = e.Check()
	}
	if err != nil {
		return badInputf("%s line %d: not an event {\"type\", \"key\", \"data\", \"ordering_key\", \"thread_key\"}: %w (nothing was published)", b.file, lineNo, err)
	}
	b.events, b.lines = append(b.events, e.Event()), append(b.lines, lineNo)
	if len(b.events) < publishFileBatchSize {
		return nil
	}
	return b.flush()
}

// flush publishes the collected events; an error names the line of the
// event at fault when the batch names the event.
func (b *eventBatch) flush() error {
	if len(b.events) == 0 {
		return nil
	}
	_, err := b.publish(b.events)
	if err != nil {
		where := fmt.Sprintf("lines %d-%d", b.lines[0], b.lines[len(b.lines)-1])
		if be := (*outboxd.BatchError)(nil); errors.As(err, &be) && be.Index < len(b.lines) {
			where = fmt.Sprintf("line %d", b.lines[be.Index])
		}
		return publishError(fmt.Errorf("%s %s: %w", b.file, where, err))
	}
	b.events, b.lines = b.events[:0], b.lines[:0]
	return nil
}
