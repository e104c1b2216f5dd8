package server

import (
	"io"
	"log/slog"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/server/telemetry"
)

// CloseSinks releases what sinks hold (a broker sink's connection) once
// the relay is done with them: every sink that implements io.Closer is
// closed.
func CloseSinks(sinks []relay.SinkConfig, log *slog.Logger) {
	for _, s := range sinks {
		if c, ok := s.Sink.(io.Closer); ok {
			if err := c.Close(); err != nil {
				log.Warn("closing a sink failed", "sink", s.Name, telemetry.ErrAttr(err))
			}
		}
	}
}
