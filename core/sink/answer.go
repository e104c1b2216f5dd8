package sink

import (
	"context"
	"unicode/utf8"
)

// MaxAnswerBytes bounds the part of a receiver's answer an attempt keeps
// ([Answer.Body]): enough for an error document or a short
// acknowledgement, too little for a page of HTML to fill the database.
const MaxAnswerBytes = 4 << 10

// Answer is what a receiver answered one attempt over HTTP (or another
// protocol with a status and a body): its status code, the start of its
// body and the address the request went to. A sink reports it with
// [RecordAnswer], delivered or not; the relay stores it with the attempt,
// beside when the attempt started and how long it took, which the relay
// measures itself. Operators read it in the message's attempts; a tenant
// reads it without RemoteAddr.
type Answer struct {
	// Status is the HTTP status code; 0 when the receiver never answered
	// (a refused connection, a timeout).
	Status int
	// Body is the answer's first bytes, at most MaxAnswerBytes (see
	// AnswerBody); the relay scrubs the configuration's secrets from it
	// and escapes what is not printable before storing it.
	Body string
	// RemoteAddr is the address the request was sent to ("203.0.113.7:443"),
	// "" when no connection was made.
	RemoteAddr string
}

// answerSlot is the context key under which the relay hands a delivery
// the Answer its sink records.
type answerSlot struct{}

// WithAnswerSlot returns ctx carrying a, where [RecordAnswer] writes the
// answer of the attempt ctx is given to. The relay calls it; a sink has no
// need to.
func WithAnswerSlot(ctx context.Context, a *Answer) context.Context {
	return context.WithValue(ctx, answerSlot{}, a)
}

// RecordAnswer records a, the receiver's answer to the attempt whose
// context is ctx (Deliver's ctx, or [Delivery.Context] in a batch). It
// does nothing when no relay asked for the answer (a sink called outside
// the relay, `outboxd sinks test`). The last answer recorded counts: a
// sink that asks twice (a token, then the delivery) records the
// delivery's last.
func RecordAnswer(ctx context.Context, a Answer) {
	if slot, ok := ctx.Value(answerSlot{}).(*Answer); ok && slot != nil {
		*slot = a
	}
}

// AnswerBody returns the start of body as [Answer.Body] keeps it: at most
// MaxAnswerBytes, cut at a character boundary so that a multi-byte
// character is never split.
func AnswerBody(body []byte) string {
	if len(body) <= MaxAnswerBytes {
		return string(body)
	}
	cut := MaxAnswerBytes
	for cut > 0 && cut > MaxAnswerBytes-utf8.UTFMax && !utf8.RuneStart(body[cut]) {
		cut--
	}
	return string(body[:cut])
}
