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

// Values of --log-level: the least severe records written.
const (
	LogLevelDebug = "debug"
	LogLevelInfo  = "info"
	LogLevelWarn  = "warn"
	LogLevelError = "error"
)

// DefaultLogLevel is --log-level's default.
const DefaultLogLevel = LogLevelInfo

// logLevels maps the values of --log-level to slog's levels.
var logLevels = map[string]slog.Level{
	LogLevelDebug: slog.LevelDebug,
	LogLevelInfo:  slog.LevelInfo,
	LogLevelWarn:  slog.LevelWarn,
	LogLevelError: slog.LevelError,
}

// LogLevel returns the slog level of a --log-level value.
func LogLevel(name string) (slog.Level, error) {
	lvl, ok := logLevels[name]
	if !ok {
		return 0, fmt.Errorf("--log-level: want %s, %s, %s or %s, got %q", LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError, name)
	}
	return lvl, nil
}

// NewLogger returns the process's logger writing to w the records at level
// (a --log-level value) and above: text or JSON as format asks (auto: text
// when terminal says w is one), with every known secret scrubbed from
// messages and attributes and durations written as Go writes them ("1.5s",
// "2m0s") in either format, not as JSON's nanoseconds.
func NewLogger(format, level string, w io.Writer, terminal bool, scrub secret.Scrubber) (*slog.Logger, error) {
	lvl, err := LogLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: replaceAttr(scrub)}
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

// replaceAttr writes a duration in its String form, which a person reads
// at a glance (slog's JSON handler would write an integer of nanoseconds),
// and scrubs everything else of scrub's secrets.
func replaceAttr(scrub secret.Scrubber) func(groups []string, a slog.Attr) slog.Attr {
	return func(groups []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String())
			return a
		}
		return scrub.ReplaceAttr(groups, a)
	}
}

// ErrAttr logs an error under the conventional key.
func ErrAttr(err error) slog.Attr { return slog.String("error", fmt.Sprint(err)) }
