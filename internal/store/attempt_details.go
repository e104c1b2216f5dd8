package store

import "time"

// AttemptDetails is one delivery attempt's details as the terminal write
// stores them (migration 031: failed_attempts.details, and last_attempt
// on messages and messages_history): when it started and how long it
// took, as the relay measured them, and what the receiver answered, as
// the sink reported it (sink.Answer), made safe to store and show.
// Status, Response and RemoteAddr are empty when the sink reported no
// answer.
type AttemptDetails struct {
	StartedAt  time.Time `json:"started_at"`
	DurationMS float64   `json:"duration_ms"`
	// Status is the receiver's HTTP status code.
	Status int `json:"status,omitempty"`
	// Response is the start of the receiver's answer, at most 4 KiB
	// (sink.MaxAnswerBytes), the configuration's secrets scrubbed.
	Response string `json:"response,omitempty"`
	// RemoteAddr is the address the request went to: operators read it;
	// what a tenant reads of an attempt leaves it out.
	RemoteAddr string `json:"remote_addr,omitempty"`
}
