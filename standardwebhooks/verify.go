package standardwebhooks

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Tolerance is how far webhook-timestamp may be from the receiver's clock,
// as the specification suggests: an older request may be a replay.
const Tolerance = 5 * time.Minute

// Verify checks the Standard Webhooks headers of a received request against
// s, as of now (the receiver's clock): webhook-timestamp must be within
// Tolerance of now, and at least one of the "v1,<base64>" signatures of
// webhook-signature must be the HMAC-SHA256 of "<id>.<timestamp>.<body>".
// Signatures of other schemes are passed over. body must be the bytes
// received: decoding and re-encoding JSON changes them.
func (s Secret) Verify(h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", ts)
	}
	if skew := now.Sub(time.Unix(sec, 0)); skew > Tolerance || skew < -Tolerance {
		return fmt.Errorf("webhook-timestamp is %s away from now", skew)
	}
	want := s.mac(id, ts, body)
	for _, sig := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != signatureVersion {
			continue // other schemes (v1a: ed25519) are not ours to check
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no v1 signature matches")
}
