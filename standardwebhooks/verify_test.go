package standardwebhooks_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/outboxd/outboxd/standardwebhooks"
)

// specVector is the example in the Standard Webhooks specification and
// reference libraries
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md).
// Sign (ExampleSecret_Sign) and Verify share the HMAC of this package, so
// each is pinned to the specification's answer, not to the other: a
// mistake shared by both cannot make the tests pass. Receivers written
// apart from this package check the sinks' requests too (the
// specification's own Go library in examples/webhookverify, other
// languages in test/polyglot).
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
	secret, err := standardwebhooks.ParseSecret(v.secret)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := strconv.ParseInt(v.ts, 10, 64)
	now := time.Unix(sent, 0).Add(time.Minute)
	h := http.Header{}
	h.Set("webhook-id", v.id)
	h.Set("webhook-timestamp", v.ts)
	h.Set("webhook-signature", "v1a,ignored "+v.signature)
	if err := secret.Verify(h, []byte(v.body), now); err != nil {
		t.Fatalf("spec vector: %v", err)
	}
	if secret.Verify(h, []byte(v.body+" "), now) == nil {
		t.Error("a changed body verified")
	}
	if secret.Verify(h, []byte(v.body), now.Add(time.Hour)) == nil {
		t.Error("an old timestamp verified")
	}
	h.Set("webhook-id", v.id+"x")
	if secret.Verify(h, []byte(v.body), now) == nil {
		t.Error("a changed id verified")
	}
}
