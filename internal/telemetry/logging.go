package telemetry

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/outboxd/outboxd/internal/secret"
)

// Values of --log-format.
const (
	LogFormatAuto = "auto" // text on a terminal, JSON otherwise
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// NewLogger returns the process's logger writing to w: text or JSON as
// format asks (auto: text when terminal says w is one), with every known
// secret scrubbed from messages and attributes.
func NewLogger(format string, w io.Writer, terminal bool, scrub secret.Scrubber) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{ReplaceAttr: scrub.ReplaceAttr}
	switch format {
	case LogFormatAuto:
		if terminal {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case LogFormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogFormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want %s, %s or %s, got %q", LogFormatAuto, LogFormatText, LogFormatJSON, format)
}

// ErrAttr logs an error under the conventional key.
func ErrAttr(err error) slog.Attr { return slog.String("error", fmt.Sprint(err)) }
