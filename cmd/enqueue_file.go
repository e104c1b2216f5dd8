package cmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/server/jsonl"
)

// Bulk enqueue limits.
const (
	// enqueueFileBatchSize is how many lines go into one EnqueueBatch
	// statement (one transaction).
	enqueueFileBatchSize = 500
	// maxEnqueueLineBytes bounds one JSON line: a payload at the core's
	// limit plus room for the other fields.
	maxEnqueueLineBytes = outboxd.DefaultMaxPayloadBytes + 64<<10
	// progressRefresh throttles the progress bar's redraws.
	progressRefresh = 100 * time.Millisecond
)

// enqueueFile enqueues the JSON lines of f.file in two passes, so that a
// bad line never leaves the file half stored. The first pass checks every
// line as Enqueue would (its JSON, its sink, the core's validation) and
// writes nothing: one bad line stops the run with exit code 2, naming the
// line, and nothing is enqueued. The second pass stores the lines in
// batches of enqueueFileBatchSize, each committing on its own (one
// transaction for a large file would hold back vacuum of the outbox for as
// long as it runs): only a database failure can stop it part way, and then
// the counts stored so far are printed. Rerunning the whole file is safe
// either way: stored lines come back as duplicates.
func (a *app) enqueueFile(ctx context.Context, cmd *cobra.Command, s session, f enqueueFlags) error {
	in, size, closeIn, err := a.openInput(f.file)
	if err != nil {
		return err
	}
	defer closeIn()
	first, again, err := replayable(in)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	defer again.Close()

	check := func(lineNo int, line []byte) error {
		msg, err := parseFileLine(line, f.sink, s.cfg)
		if err == nil {
			err = s.ob.Validate(ctx, msg)
		}
		if err != nil {
			return badInputf("%s line %d: %w (nothing was enqueued)", f.file, lineNo, err)
		}
		return nil
	}
	if err := eachLine(first, f.file, newProgressBar(a.io.Err, size, "check"), check); err != nil {
		return err
	}

	b := fileBatch{s: s}
	store := func(lineNo int, line []byte) error {
		msg, err := parseFileLine(line, f.sink, s.cfg)
		if err != nil { // only if the file changed since the first pass
			return badInputf("%s line %d changed while it was enqueued: %w", f.file, lineNo, err)
		}
		return b.add(ctx, lineNo, msg)
	}
	err = eachLine(again, f.file, newProgressBar(a.io.Err, size, "enqueue"), store)
	if err == nil {
		err = b.flush(ctx)
	}
	if err != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "created %d, duplicate %d before the error; rerunning the file is safe\n", b.created, b.duplicates)
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "created %d, duplicate %d\n", b.created, b.duplicates)
	return nil
}

// fileBatch collects checked lines into EnqueueBatch calls and counts
// their results.
type fileBatch struct {
	s                   session
	msgs                []outboxd.Message
	firstLine, lastLine int
	created, duplicates int
}

func (b *fileBatch) add(ctx context.Context, lineNo int, msg outboxd.Message) error {
	if len(b.msgs) == 0 {
		b.firstLine = lineNo
	}
	b.lastLine = lineNo
	b.msgs = append(b.msgs, msg)
	if len(b.msgs) < enqueueFileBatchSize {
		return nil
	}
	return b.flush(ctx)
}

// flush stores the collected lines in one statement.
func (b *fileBatch) flush(ctx context.Context) error {
	if len(b.msgs) == 0 {
		return nil
	}
	results, err := b.s.ob.EnqueueBatch(ctx, b.s.pool, b.msgs)
	if err != nil {
		return enqueueError(fmt.Errorf("lines %d-%d: %w", b.firstLine, b.lastLine, err))
	}
	for _, r := range results {
		if r.Created {
			b.created++
		} else {
			b.duplicates++
		}
	}
	b.msgs = b.msgs[:0]
	return nil
}

// eachLine calls fn with the number and the trimmed text of every line of
// r that is not blank, advancing bar (when not nil) as it reads.
func eachLine(r io.Reader, name string, bar *progressbar.ProgressBar, fn func(lineNo int, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEnqueueLineBytes)
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
		if err := fn(lineNo, line); err != nil {
			return err
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return badInputf("%s line %d: longer than %d bytes (nothing was enqueued)", name, lineNo+1, maxEnqueueLineBytes)
	case err != nil:
		return fmt.Errorf("read %s after line %d: %w", name, lineNo, err)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return nil
}

// replayable returns in to read once, and a second reader with the bytes
// the first one read, for after it reached its end: in itself, rewound,
// when it can seek (a regular file: lines appended meanwhile are not read
// again, they were not checked); else a temporary copy that the first
// reader fills as it goes (a pipe, stdin). Close the second reader to
// remove the copy.
func replayable(in io.Reader) (io.Reader, io.ReadCloser, error) {
	if seeker, ok := in.(io.ReadSeeker); ok {
		if start, err := seeker.Seek(0, io.SeekCurrent); err == nil {
			first := &countingReader{r: in}
			return first, &rewinder{seeker: seeker, start: start, length: &first.n}, nil
		}
	}
	spool, err := os.CreateTemp("", "outboxd-enqueue-*.jsonl")
	if err != nil {
		return nil, nil, fmt.Errorf("a copy of the input for the second pass: %w", err)
	}
	first := &countingReader{r: io.TeeReader(in, spool)}
	return first, &rewinder{seeker: spool, length: &first.n, remove: spool}, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// rewinder reads *length bytes of seeker from start, seeking there on its
// first read.
type rewinder struct {
	seeker io.ReadSeeker
	start  int64
	length *int64
	rest   io.Reader // nil until the first read
	remove *os.File  // the temporary copy to delete on Close, if any
}

func (r *rewinder) Read(p []byte) (int, error) {
	if r.rest == nil {
		if _, err := r.seeker.Seek(r.start, io.SeekStart); err != nil {
			return 0, err
		}
		r.rest = io.LimitReader(r.seeker, *r.length)
	}
	return r.rest.Read(p)
}

func (r *rewinder) Close() error {
	if r.remove == nil {
		return nil
	}
	return errors.Join(r.remove.Close(), os.Remove(r.remove.Name()))
}

func parseFileLine(line []byte, defaultSink string, cfg *config.Config) (outboxd.Message, error) {
	var l jsonl.Message
	if err := jsonl.Decode(bytes.NewReader(line), &l); err != nil {
		return outboxd.Message{}, fmt.Errorf("not a JSON object with sink, dedup_key, payload and ordering_key: %w", err)
	}
	if l.Sink == "" {
		l.Sink = defaultSink
	}
	if err := checkSink(cfg, l.Sink); err != nil {
		return outboxd.Message{}, err
	}
	if len(l.Payload) == 0 {
		return outboxd.Message{}, fmt.Errorf("payload is missing")
	}
	return l.Message(), nil
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

// newProgressBar returns a bar labelled pass drawn on w when w is a
// terminal, else nil: logs and pipes get only the final count.
func newProgressBar(w io.Writer, size int64, pass string) *progressbar.ProgressBar {
	if !isTerminal(w) {
		return nil
	}
	return progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(pass),
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
