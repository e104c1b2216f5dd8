package relay

import (
	"encoding/json"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/safetext"
	"github.com/outboxd/outboxd/internal/store"
)

// attemptDetails is the JSON of row's attempt, which took elapsed and
// ended in err, for the terminal write; nil when there is nothing to
// store: the sink was never called (a row refused before delivery), or it
// delivered without reporting an answer (a broker), so that only sinks
// that speak HTTP pay for the details of their deliveries. The answer is
// made safe once, here, as errors are (storedError): the configuration's
// secrets removed, what is not printable escaped, at most
// sink.MaxAnswerBytes.
func (r *Relay) attemptDetails(row *claimedRow, elapsed time.Duration, err error) []byte {
	a := row.answer
	if row.started.IsZero() || (err == nil && a == sink.Answer{}) {
		return nil
	}
	rec := store.AttemptDetails{StartedAt: row.started.UTC(), DurationMS: float64(elapsed.Microseconds()) / 1000,
		Status: a.Status, RemoteAddr: a.RemoteAddr}
	if a.Body != "" {
		body := a.Body
		if r.cfg.Redact != nil {
			body = r.cfg.Redact(body)
		}
		rec.Response = safetext.Text(body, sink.MaxAnswerBytes)
	}
	if rec.Status == 0 {
		// A sink that names the status only in its error (sink.HTTPStatus).
		rec.Status, _ = sink.StatusCode(err)
	}
	b, jerr := json.Marshal(rec)
	if jerr != nil {
		return nil // a time and plain strings always encode
	}
	return b
}
