package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// DigestPolicy groups the rows of a sink (or of a route's target) that
// arrive faster than their receiver takes them into digests: one
// delivery each (docs/digests.md). The rows of one digest key that become
// deliverable within Window of the first of them, or that wait behind the
// receiver's rate limit, go out together, up to MaxMessages at a time;
// a digest counts as one delivery for the rate limit.
type DigestPolicy struct {
	// Window is how long the first row of a key waits for others.
	Window time.Duration
	// MaxMessages bounds a digest's members.
	MaxMessages int
	// Key names a row's digest key from its event (or payload), before the
	// row is rendered; nil groups by the rate key (a Slack channel,
	// [RateKeyer]), or the sink as a whole when it names none. An error is
	// the row's outcome, as the sink's would be.
	Key func(d *Delivery) (string, error)
}

// DigestSink is implemented by sinks that deliver a digest's members as
// one delivery: one Slack post, one email, one webhook call whose body is a
// list. A sink configured with a digest must implement it.
//
// DeliverDigest returns nil when the digest was accepted; any other error
// is every member's outcome, classified as Deliver's is, except that an
// error from [RefuseMembers] dead-letters the refused members only and
// sends the others again as the same digest. The receipt set on the
// digest ([Digest.SetReceipt]) is stored on every member.
type DigestSink interface {
	Sink
	DeliverDigest(ctx context.Context, dg *Digest) error
}

// Digest is one attempt at delivering a digest.
type Digest struct {
	ID   int64  // the digest's id (migration 018), the same on every attempt
	Sink string // the configured sink instance name
	// Key is the digest key its members share.
	Key string
	// Members are the rows, in enqueue order, each rendered as the target's
	// ordinary template renders it (its Payload).
	Members []*Delivery
	// Payload, when set, is the digest's own payload, rendered from the
	// route target's digest template: the sink sends it instead of joining
	// the members.
	Payload json.RawMessage
	// Uncertain reports that an earlier attempt at this digest may have
	// gone through (its relay died or overran its lease): a sink without
	// an idempotency key at the receiver checks before sending again.
	Uncertain bool

	receipt json.RawMessage
}

// DeliveryID is the id a receiver de-duplicates the digest on:
// "<sink>/digest-<id>", the sink's name path-escaped as in
// [Delivery.DeliveryID]; the same on every attempt.
func (dg *Digest) DeliveryID() string {
	return DigestDeliveryPrefix(dg.Sink) + strconv.FormatInt(dg.ID, 10)
}

// DigestDeliveryPrefix is what the delivery ids of sinkName's digests
// start with, before the digest's id.
func DigestDeliveryPrefix(sinkName string) string {
	return url.PathEscape(sinkName) + "/digest-"
}

// SetReceipt records what the receiver returned for the digest; every
// member stores it.
func (dg *Digest) SetReceipt(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("outbox: encode digest receipt: %w", err)
	}
	dg.receipt = b
	return nil
}

// Receipt returns the receipt recorded with [Digest.SetReceipt], or nil.
func (dg *Digest) Receipt() json.RawMessage { return dg.receipt }

// refusedMembers lists the members of a digest its sink refused, by
// index into Digest.Members.
type refusedMembers struct{ refused map[int]error }

func (e *refusedMembers) Error() string {
	idx := slices.Sorted(maps.Keys(e.refused))
	return fmt.Sprintf("%d digest member(s) refused; first (member %d): %s", len(idx), idx[0], errString(e.refused[idx[0]]))
}

// RefuseMembers is what DeliverDigest returns, having sent nothing, when
// some members cannot be delivered whatever happens (a payload the
// receiver cannot take): refused maps their indexes in
// Digest.Members to why. The relay dead-letters each of them alone, with
// its error, and sends the others at once as the same digest.
func RefuseMembers(refused map[int]error) error {
	return &refusedMembers{refused: refused}
}

// RefusedMembers returns the members an error of [RefuseMembers] in
// err's chain refused, by index, and whether there was one.
func RefusedMembers(err error) (map[int]error, bool) {
	var r *refusedMembers
	if errors.As(err, &r) && len(r.refused) > 0 {
		return r.refused, true
	}
	return nil, false
}
