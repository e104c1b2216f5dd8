package standardwebhooks_test

import (
	"fmt"
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
