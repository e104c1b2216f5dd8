// Command webhookverify is a webhook endpoint that checks outboxd's Standard
// Webhooks signature with the specification's own Go library before it
// trusts a delivery. Copy verifiedHandler into your receiver.
//
//	WEBHOOK_SECRET=whsec_... go run ./examples/webhookverify -listen 127.0.0.1:8090
//
// Configure the webhook sink with the same secret (during a rotation the
// sink signs with every configured secret, so a receiver holding either the
// old or the new one verifies).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// maxBodyBytes bounds what the receiver reads of one request.
const maxBodyBytes = 1 << 20

// Delivery is a verified webhook: its id (the delivery id, <sink>/<dedup
// key>, the same on every retry, so a receiver can drop redeliveries) and
// its JSON body.
type Delivery struct {
	ID      string          `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

// verifiedHandler answers 204 and passes the delivery to handle when the
// signature and timestamp check out, and 401 otherwise (outboxd treats a 4xx
// as permanent: the message becomes a dead letter to redrive once the
// secret is fixed).
func verifiedHandler(secret string, handle func(Delivery)) (http.Handler, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Verify the exact bytes received: decoding and re-encoding the
		// JSON first would change them and break the signature.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		handle(Delivery{ID: r.Header.Get("webhook-id"), Payload: body})
		w.WriteHeader(http.StatusNoContent)
	}), nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	h, err := verifiedHandler(os.Getenv("WEBHOOK_SECRET"), func(d Delivery) {
		fmt.Printf("verified %s: %s\n", d.ID, d.Payload)
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(*listen, h))
}
