package cmd

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/outboxd/outboxd/internal/secret"
)

// Values of --log-format.
const (
	logFormatAuto = "auto" // text on a terminal, JSON otherwise
	logFormatText = "text"
	logFormatJSON = "json"
)

// newLogger returns the process's logger: text or JSON as format asks,
// with every known secret scrubbed from messages and attributes.
func newLogger(format string, w io.Writer, scrub secret.Scrubber) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{ReplaceAttr: scrub.ReplaceAttr}
	switch format {
	case logFormatAuto:
		if isTerminal(w) {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case logFormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case logFormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, badInputf("--log-format: want %s, %s or %s, got %q", logFormatAuto, logFormatText, logFormatJSON, format)
}

// errAttr logs an error under the conventional key.
func errAttr(err error) slog.Attr { return slog.String("error", fmt.Sprint(err)) }
