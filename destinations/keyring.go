package destinations

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// EnvSecretsKey is the environment variable holding the keys that seal
// destinations' signing secrets: "<id>:<base64 of 32 bytes>", or several
// separated by commas during a key rotation. The first seals; every one
// opens. Rotate by putting a new key first, keeping the old one after it,
// running `outboxd destinations rekey`, then dropping the old key.
const EnvSecretsKey = "OUTBOXD_SECRETS_KEY"

// KeyBytes is the length of a sealing key: AES-256.
const KeyBytes = 32

// keyIDPattern is what a key's id may be: it is stored beside each sealed
// secret, so it must be short and printable.
var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Keyring seals and opens signing secrets. Its String method shows only
// key ids.
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
	ids     []string
	// raw are the keys as given, for Derive only: nothing but sealing
	// uses them as they are.
	raw map[string][]byte
}

// ErrNoKeyring is returned where secrets must be sealed or opened and no
// key is configured.
var ErrNoKeyring = errors.New("destinations: no key to seal signing secrets with: set " + EnvSecretsKey + " (see docs/destinations.md)")

// ParseKeyring reads keys written as EnvSecretsKey holds them. Its errors
// name the entry at fault, never a key.
func ParseKeyring(s string) (*Keyring, error) {
	if strings.TrimSpace(s) == "" {
		return nil, ErrNoKeyring
	}
	k := &Keyring{aeads: map[string]cipher.AEAD{}, raw: map[string][]byte{}}
	for i, entry := range strings.Split(s, ",") {
		id, encoded, ok := strings.Cut(strings.TrimSpace(entry), ":")
		if !ok || !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("%s entry %d: want <id>:<base64 key>, the id of letters, digits, \"_\", \".\" and \"-\"", EnvSecretsKey, i+1)
		}
		key, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil || len(key) != KeyBytes {
			return nil, fmt.Errorf("%s key %s: want the standard base64 of %d random bytes", EnvSecretsKey, id, KeyBytes)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("%s: key id %s is given twice", EnvSecretsKey, id)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("%s key %s: %w", EnvSecretsKey, id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%s key %s: %w", EnvSecretsKey, id, err)
		}
		k.aeads[id] = aead
		k.raw[id] = key
		k.ids = append(k.ids, id)
	}
	k.current = k.ids[0]
	return k, nil
}

// KeyringFromEnv reads EnvSecretsKey through lookup (os.LookupEnv); it
// returns ErrNoKeyring when the variable is unset or empty.
func KeyringFromEnv(lookup func(string) (string, bool)) (*Keyring, error) {
	v, _ := lookup(EnvSecretsKey)
	return ParseKeyring(v)
}

// NewKey returns a fresh random key in EnvSecretsKey's form, with id.
func NewKey(id string) (string, error) {
	if !keyIDPattern.MatchString(id) {
		return "", fmt.Errorf("key id %q: use letters, digits, \"_\", \".\" and \"-\"", id)
	}
	key := make([]byte, KeyBytes)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("make a key: %w", err)
	}
	return id + ":" + base64.StdEncoding.EncodeToString(key), nil
}

// Current is the id of the key that seals.
func (k *Keyring) Current() string { return k.current }

// String lists the key ids, never a key.
func (k *Keyring) String() string { return "keyring[" + strings.Join(k.ids, ",") + "]" }

// Derive returns, for each key of the ring by id, a key of KeyBytes
// derived from it for purpose with HKDF-SHA256 (purpose is its info):
// what lets another feature sign with a key every process holding
// EnvSecretsKey shares (the tenant portal's links) without a secret of
// its own and without using a sealing key for anything but sealing.
// Keys derived for different purposes are unrelated.
func (k *Keyring) Derive(purpose string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(k.raw))
	for id, key := range k.raw {
		derived, err := hkdf.Key(sha256.New, key, nil, purpose, KeyBytes)
		if err != nil {
			return nil, fmt.Errorf("derive a key for %s from key %s: %w", purpose, id, err)
		}
		out[id] = derived
	}
	return out, nil
}

// Seal encrypts secret for destination id (bound to it: a sealed secret
// copied to another destination's row does not open), under the current
// key. The nonce is random and travels in front of the ciphertext.
func (k *Keyring) Seal(destination string, secret []byte) (keyID string, sealed []byte, err error) {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, fmt.Errorf("seal a signing secret: %w", err)
	}
	return k.current, aead.Seal(nonce, nonce, secret, []byte(destination)), nil
}

// Open decrypts what Seal sealed under key keyID for destination.
func (k *Keyring) Open(keyID, destination string, sealed []byte) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("destination %s: its secret is sealed under key %s, which %s does not hold", destination, keyID, EnvSecretsKey)
	}
	n := aead.NonceSize()
	if len(sealed) < n {
		return nil, fmt.Errorf("destination %s: its sealed secret is truncated", destination)
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(destination))
	if err != nil {
		return nil, fmt.Errorf("destination %s: its secret does not open with key %s (another key, or altered)", destination, keyID)
	}
	return plain, nil
}
