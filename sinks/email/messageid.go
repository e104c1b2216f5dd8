package email

import (
	"crypto/sha256"
	"encoding/hex"
)

// messageIDHashChars is how many hex characters of the SHA-256 digest form
// the Message-ID's left part: 128 bits, plenty to keep distinct rows apart.
const messageIDHashChars = 32

// MessageID returns the Message-ID header value (with angle brackets) of the
// mail that sink sends for the row with dedupKey, with domain (the sender's
// domain) as its right part. It depends on nothing else, so every attempt at
// a row produces the same Message-ID and a receiving server or client can
// tell a retry from a new mail.
//
// The sink name is hashed with the key because dedup keys are unique per
// sink only; the NUL byte between them cannot occur in either.
func MessageID(sink, dedupKey, domain string) string {
	sum := sha256.Sum256([]byte(sink + "\x00" + dedupKey))
	return "<" + hex.EncodeToString(sum[:])[:messageIDHashChars] + "@" + domain + ">"
}
