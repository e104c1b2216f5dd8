package webhook_test

import (
	"net/http"
	"time"

	"github.com/outboxd/outboxd/standardwebhooks"
)

// verify checks a request's Standard Webhooks headers as a receiver holding
// secret ("whsec_" + base64 key) does, with the verifier that package
// standardwebhooks pins to the specification's own example.
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	s, err := standardwebhooks.ParseSecret(secret)
	if err != nil {
		return err
	}
	return s.Verify(h, body, now)
}
