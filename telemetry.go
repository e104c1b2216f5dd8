package outboxd

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd/internal/otelscope"
)

// Values of the result label of the enqueue counter.
const (
	enqueueCreated   = "created"
	enqueueDuplicate = "duplicate"
)

var attrEnqueueResult = attribute.Key("result")

// newEnqueueCounter makes the outbox.enqueues counter of mp. Creating a
// counter only fails on an invalid name; the nil counter that leaves is
// then a no-op in countEnqueues.
func newEnqueueCounter(mp metric.MeterProvider) metric.Int64Counter {
	c, _ := mp.Meter(otelscope.Name).Int64Counter("outbox.enqueues",
		metric.WithDescription("Messages enqueued, by sink and result (created or duplicate)."))
	return c
}

// countEnqueues adds n enqueues of sink to the outbox.enqueues counter,
// labelled created or duplicate.
func (o *Outbox) countEnqueues(ctx context.Context, sink string, created bool, n int64) {
	if o.enqueues == nil {
		return
	}
	result := enqueueDuplicate
	if created {
		result = enqueueCreated
	}
	o.enqueues.Add(ctx, n, metric.WithAttributes(otelscope.AttrSink.String(sink), attrEnqueueResult.String(result)))
}
