package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core"
)

// Bulk enqueue limits.
const (
	// EnqueueFileBatchSize is how many lines go into one EnqueueBatch
	// statement (one transaction).
	EnqueueFileBatchSize = 500
	// MaxEnqueueLineBytes bounds one JSON line: a payload at the core's
	// limit plus room for the other fields.
	MaxEnqueueLineBytes = core.DefaultMaxPayloadBytes + 64<<10
	// progressRefresh throttles the progress bar's redraws.
	progressRefresh = 100 * time.Millisecond
)

// fileLine is one line of an enqueue file.
type fileLine struct {
	Sink        string          `json:"sink"`
	DedupKey    string          `json:"dedup_key"`
	Payload     json.RawMessage `json:"payload"`
	OrderingKey string          `json:"ordering_key"`
}

// enqueueFile streams JSON lines into EnqueueBatch calls. Each batch
// commits on its own, so a bad line stops the run after the batches before
// it; rerunning the whole file is safe because stored lines come back as
// duplicates.
func (a *app) enqueueFile(ctx context.Context, cmd *cobra.Command, s session, f enqueueFlags) error {
	in, size, closeIn, err := a.openInput(f.file)
	if err != nil {
		return err
	}
	defer closeIn()
	bar := newProgressBar(a.io.Err, size)
	var (
		created, duplicates int
		batch               []core.Message
		firstLine           int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		results, err := s.ob.EnqueueBatch(ctx, s.pool, batch)
		if err != nil {
			return enqueueError(fmt.Errorf("lines %d-%d: %w", firstLine, firstLine+len(batch)-1, err))
		}
		for _, r := range results {
			if r.Created {
				created++
			} else {
				duplicates++
			}
		}
		batch = batch[:0]
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), MaxEnqueueLineBytes)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		if bar != nil {
			_ = bar.Add(len(sc.Bytes()) + 1)
		}
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		msg, err := parseFileLine(line, f.sink, s.cfg)
		if err != nil {
			err = badInputf("%s line %d: %w", f.file, lineNo, err)
			return reportPartial(cmd, created, duplicates, flushThen(flush, err))
		}
		if len(batch) == 0 {
			firstLine = lineNo
		}
		batch = append(batch, msg)
		if len(batch) == EnqueueFileBatchSize {
			if err := flush(); err != nil {
				return reportPartial(cmd, created, duplicates, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return reportPartial(cmd, created, duplicates, fmt.Errorf("read %s after line %d: %w", f.file, lineNo, err))
	}
	if err := flush(); err != nil {
		return reportPartial(cmd, created, duplicates, err)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	fmt.Fprintf(cmd.OutOrStdout(), "created %d, duplicate %d\n", created, duplicates)
	return nil
}

// flushThen stores the good lines read before a bad one, then returns err.
func flushThen(flush func() error, err error) error {
	if ferr := flush(); ferr != nil {
		return ferr
	}
	return err
}

// reportPartial prints what was stored before err stopped the run.
func reportPartial(cmd *cobra.Command, created, duplicates int, err error) error {
	fmt.Fprintf(cmd.OutOrStdout(), "created %d, duplicate %d before the error\n", created, duplicates)
	return err
}

func parseFileLine(line []byte, defaultSink string, cfg *Config) (core.Message, error) {
	var l fileLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return core.Message{}, fmt.Errorf("not a JSON object with sink, dedup_key, payload and ordering_key: %w", err)
	}
	if l.Sink == "" {
		l.Sink = defaultSink
	}
	if err := checkSink(cfg, l.Sink); err != nil {
		return core.Message{}, err
	}
	if len(l.Payload) == 0 {
		return core.Message{}, fmt.Errorf("payload is missing")
	}
	return core.Message{Sink: l.Sink, DedupKey: l.DedupKey, Payload: l.Payload, OrderingKey: l.OrderingKey}, nil
}

// openInput opens name, or stdin for "-", and returns its size in bytes
// when known (-1 otherwise) for the progress bar.
func (a *app) openInput(name string) (io.Reader, int64, func(), error) {
	if name == "-" {
		return a.io.In, -1, func() {}, nil
	}
	file, err := os.Open(name)
	if err != nil {
		return nil, 0, nil, badInputf("enqueue: %w", err)
	}
	size := int64(-1)
	if st, err := file.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return file, size, func() { _ = file.Close() }, nil
}

// newProgressBar returns a bar drawn on w when w is a terminal, else nil:
// logs and pipes get only the final count.
func newProgressBar(w io.Writer, size int64) *progressbar.ProgressBar {
	if !isTerminal(w) {
		return nil
	}
	return progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("enqueue"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(progressRefresh),
		progressbar.OptionClearOnFinish(),
	)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
