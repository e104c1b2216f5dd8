package standardwebhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Bounds of a signing secret's key, as the Standard Webhooks specification
// recommends.
const (
	// SecretPrefix starts every secret in its text form.
	SecretPrefix = "whsec_"
	// MinSecretBytes is the shortest key accepted (192 bits).
	MinSecretBytes = 24
	// MaxSecretBytes is the longest key accepted.
	MaxSecretBytes = 64
	// signatureVersion tags an HMAC-SHA256 signature.
	signatureVersion = "v1"
)

// The Standard Webhooks headers of a request.
const (
	// HeaderID is the message's id, the same on every retry, so that a
	// receiver can drop redeliveries.
	HeaderID = "webhook-id"
	// HeaderTimestamp is the time of the attempt, in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature holds one signature per signing secret,
	// space-separated.
	HeaderSignature = "webhook-signature"
)

// Secret is a Standard Webhooks signing key. Its String method never shows
// the key, so a Secret printed by mistake does not leak.
type Secret struct{ key []byte }

// ParseSecret decodes a secret written as "whsec_" + base64(key). Its errors
// describe what is wrong without repeating the secret.
func ParseSecret(s string) (Secret, error) {
	encoded, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, errors.New("does not start with " + SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return Secret{}, fmt.Errorf("the part after %s is not standard base64", SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("the key is %d bytes, want %d to %d", len(key), MinSecretBytes, MaxSecretBytes)
	}
	return Secret{key: key}, nil
}

// NewSecretBytes is the key length of a secret NewSecret makes (256 bits).
const NewSecretBytes = 32

// NewSecret makes a random secret, returned with its text form ("whsec_"
// and the base64 of the key), the one time it can be shown.
func NewSecret() (Secret, string, error) {
	key := make([]byte, NewSecretBytes)
	if _, err := rand.Read(key); err != nil {
		return Secret{}, "", fmt.Errorf("make a signing secret: %w", err)
	}
	return Secret{key: key}, SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// String returns a redacted placeholder.
func (Secret) String() string { return SecretPrefix + "<redacted>" }

// Sign returns the signature of one message, "v1," followed by the base64
// HMAC-SHA256 of id, timestamp (Unix seconds) and body joined by dots.
func (s Secret) Sign(id string, timestamp time.Time, body []byte) string {
	return signatureVersion + "," + base64.StdEncoding.EncodeToString(s.mac(id, strconv.FormatInt(timestamp.Unix(), 10), body))
}

// mac is the HMAC-SHA256 of id, timestamp and body joined by dots: the
// timestamp as written in the header, so that a receiver checks the very
// bytes that were signed.
func (s Secret) mac(id, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return mac.Sum(nil)
}

// SetHeaders sets the Standard Webhooks headers of one request on h:
// webhook-id id, webhook-timestamp timestamp and webhook-signature a
// signature per secret. With no secret no webhook-signature is set: the
// request goes unsigned.
func SetHeaders(h http.Header, secrets []Secret, id string, timestamp time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(timestamp.Unix(), 10))
	if len(secrets) == 0 {
		return
	}
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = s.Sign(id, timestamp, body)
	}
	h.Set(HeaderSignature, strings.Join(sigs, " "))
}
