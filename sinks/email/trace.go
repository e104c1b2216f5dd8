package email

import (
	"context"

	"github.com/wneessen/go-mail"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the sink's spans.
const tracerName = "github.com/outboxd/outboxd/sinks/email"

// spanName names the span around one SMTP exchange.
const spanName = "smtp send"

// send runs the SMTP exchange for msg inside its own client span, and
// classifies a failure. A mail the server accepted counts as sent even when
// the exchange fails afterwards (RSET or QUIT), since retrying it would
// deliver it twice.
func (s *Sink) send(ctx context.Context, msg *mail.Msg, recipients int) error {
	ctx, span := s.tracer.Start(ctx, spanName,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("server.address", s.server.host),
			attribute.Int("server.port", s.server.port),
			attribute.String("outboxd.email.tls", s.cfg.TLS),
			attribute.Int("outboxd.email.recipients", recipients),
			attribute.String("outboxd.email.message_id", msg.GetMessageID()),
		))
	defer span.End()

	c, err := s.client(ctx)
	if err == nil {
		err = c.DialAndSendWithContext(ctx, msg)
	}
	if err != nil && msg.IsDelivered() {
		span.AddEvent("accepted; error after delivery ignored", trace.WithAttributes(attribute.String("error", err.Error())))
		err = nil
	}
	if err != nil {
		err = classify(err)
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	if r := msg.ServerResponse(); r != "" {
		span.SetAttributes(attribute.String("outboxd.email.server_response", r))
	}
	return nil
}
