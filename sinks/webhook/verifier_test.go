package webhook_test

// An independent Standard Webhooks verifier, written from the specification
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md)
// rather than from the sink's signing code, so that a mistake shared by
// signer and verifier cannot make the tests pass.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// verifyTolerance is the spec's suggested window for webhook-timestamp.
const verifyTolerance = 5 * time.Minute

// verify checks the Standard Webhooks headers of a received request against
// one secret ("whsec_" + base64 key): the timestamp must be recent and at
// least one of the space-delimited "v1,<base64>" signatures must be the
// HMAC-SHA256 of "<id>.<timestamp>.<body>".
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", ts)
	}
	if skew := now.Sub(time.Unix(sec, 0)); skew > verifyTolerance || skew < -verifyTolerance {
		return fmt.Errorf("webhook-timestamp is %s away from now", skew)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	var signed []byte
	signed = append(signed, id...)
	signed = append(signed, '.')
	signed = append(signed, ts...)
	signed = append(signed, '.')
	signed = append(signed, body...)
	m := hmac.New(sha256.New, key)
	m.Write(signed)
	want := m.Sum(nil)
	for _, sig := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue // other schemes (v1a: ed25519) are not ours to check
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no v1 signature matches")
}

// specVector is the example in the Standard Webhooks specification and
// reference libraries.
var specVector = struct {
	secret, id, ts, body, signature string
}{
	secret:    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	id:        "msg_p5jXN8AQM9LWM0D4loKWxJek",
	ts:        "1614265330",
	body:      `{"test": 2432232314}`,
	signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}

// TestVerifierAcceptsSpecVector checks the verifier itself: it accepts the
// specification's example and rejects any change to it.
func TestVerifierAcceptsSpecVector(t *testing.T) {
	t.Parallel()
	v := specVector
	sent, _ := strconv.ParseInt(v.ts, 10, 64)
	now := time.Unix(sent, 0).Add(time.Minute)
	h := http.Header{}
	h.Set("webhook-id", v.id)
	h.Set("webhook-timestamp", v.ts)
	h.Set("webhook-signature", "v1a,ignored "+v.signature)
	if err := verify(v.secret, h, []byte(v.body), now); err != nil {
		t.Fatalf("spec vector: %v", err)
	}
	if verify(v.secret, h, []byte(v.body+" "), now) == nil {
		t.Error("a changed body verified")
	}
	if verify(v.secret, h, []byte(v.body), now.Add(time.Hour)) == nil {
		t.Error("an old timestamp verified")
	}
	h.Set("webhook-id", v.id+"x")
	if verify(v.secret, h, []byte(v.body), now) == nil {
		t.Error("a changed id verified")
	}
}
