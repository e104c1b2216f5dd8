package standardwebhooks_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/outboxd/outboxd/standardwebhooks"
)

// The signature of the Standard Webhooks specification's example message.
func ExampleSecret_Sign() {
	secret, err := standardwebhooks.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	sig := secret.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	fmt.Println(sig)
	fmt.Println(secret) // a Secret never prints its key
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// whsec_<redacted>
}

// A receiver checks a request's headers and the bytes of its body, as
// received, against its secret.
func ExampleSecret_Verify() {
	secret, err := standardwebhooks.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set(standardwebhooks.HeaderID, "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set(standardwebhooks.HeaderTimestamp, "1614265330")
	h.Set(standardwebhooks.HeaderSignature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)
	receivedAt := time.Unix(1614265330, 0).Add(time.Second) // time.Now() in a receiver
	fmt.Println(secret.Verify(h, body, receivedAt))
	fmt.Println(secret.Verify(h, []byte(`{"test": 0}`), receivedAt))
	// Output:
	// <nil>
	// no v1 signature matches
}
