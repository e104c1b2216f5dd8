package relay_test

import (
	"errors"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
)

// TestEffectiveFillsDefaultsAndReportsEveryField: zero fields take the
// defaults, and every field out of range is reported at once, each naming
// its field and sink, even for a sink whose Sink is not built yet.
func TestEffectiveFillsDefaultsAndReportsEveryField(t *testing.T) {
	t.Parallel()
	eff, err := relay.Config{Sinks: []relay.SinkConfig{{Name: "a"}}}.Effective()
	if err != nil {
		t.Fatal(err)
	}
	s := eff.Sinks[0]
	if eff.BatchSize != relay.DefaultBatchSize || eff.Lease != relay.DefaultLease || eff.ShutdownTimeout != relay.DefaultShutdownTimeout ||
		s.MaxAttempts != relay.DefaultMaxAttempts || s.Backoff.Max != relay.DefaultBackoffMax || s.MaxInFlight != relay.DefaultConcurrency || s.RateLimit != nil {
		t.Errorf("defaults not applied: %+v, sink %+v", eff, s)
	}

	_, err = relay.Config{
		BatchSize:       -1,
		ShutdownTimeout: -time.Second,
		Sinks: []relay.SinkConfig{{
			Name: "a", MaxAttempts: -2, MaxInFlight: -3,
			Backoff:   relay.Backoff{Initial: time.Minute, Max: time.Second},
			RateLimit: &sink.RateLimit{Rate: 0, Per: time.Second},
		}},
	}.Effective()
	want := map[string]bool{"/BatchSize": true, "/ShutdownTimeout": true, "a/MaxAttempts": true,
		"a/MaxInFlight": true, "a/Backoff": true, "a/RateLimit.Rate": true}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *relay.FieldError
		if !errors.As(e, &fe) {
			t.Errorf("not a *FieldError: %v", e)
			continue
		}
		if !want[fe.Sink+"/"+fe.Field] {
			t.Errorf("unexpected problem %v", fe)
		}
		delete(want, fe.Sink+"/"+fe.Field)
	}
	if len(want) > 0 {
		t.Errorf("not reported: %v (error: %v)", want, err)
	}
}
