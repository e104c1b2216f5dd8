package webhook

import (
	"bytes"
	"context"

	"github.com/outboxd/outboxd/core/sink"
)

var _ sink.DigestSink = (*Sink)(nil)

// DeliverDigest POSTs a digest in one call, signed, under webhook-id the
// digest's delivery id ("<sink>/digest-<id>", the same on every attempt):
// its digest template's body when the route target has one, else a JSON
// list of its members' payloads in enqueue order. The receiver takes or
// refuses the list whole.
func (s *Sink) DeliverDigest(ctx context.Context, dg *sink.Digest) error {
	body := []byte(dg.Payload)
	if body == nil {
		body = digestList(dg.Members)
	}
	return s.post(ctx, dg.DeliveryID(), body)
}

// digestList is the JSON list of the members' payloads, each as it was
// enqueued (or rendered).
func digestList(members []*sink.Delivery) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m.Payload)
	}
	b.WriteByte(']')
	return b.Bytes()
}
