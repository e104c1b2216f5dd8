package destinations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// authSealedFor is what a destination's Auth is sealed for (the AEAD's
// additional data): its id and what the blob is, so that neither another
// destination's authentication nor one of its signing secrets opens in
// its place.
func authSealedFor(id string) string { return id + "/auth" }

// saveAuth stores a (checked, summarised as sum) as destination id's
// authentication in tx, sealed under the keyring's current key, or
// removes it when a sets nothing.
func (s *Store) saveAuth(ctx context.Context, tx pgx.Tx, id string, a Auth, sum AuthSummary) error {
	if a.empty() {
		if err := s.q.DestinationAuthDelete(ctx, tx, id); err != nil {
			return fmt.Errorf("destinations: remove the authentication of %s: %w", id, err)
		}
		return nil
	}
	if s.keys == nil {
		return ErrNoKeyring
	}
	plain, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("destinations: encode the authentication of %s: %w", id, err)
	}
	keyID, sealed, err := s.keys.Seal(authSealedFor(id), plain)
	if err != nil {
		return err
	}
	shown, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("destinations: encode the authentication of %s: %w", id, err)
	}
	if err := s.q.DestinationAuthSave(ctx, tx, id, keyID, sealed, shown); err != nil {
		return fmt.Errorf("destinations: store the authentication of %s: %w", id, err)
	}
	return nil
}

// openAuth opens destination id's authentication as sealed under keyID.
func openAuth(keys *Keyring, id, keyID string, sealed []byte) (Auth, error) {
	plain, err := keys.Open(keyID, authSealedFor(id), sealed)
	if err != nil {
		return Auth{}, err
	}
	var a Auth
	if err := json.Unmarshal(plain, &a); err != nil {
		return Auth{}, fmt.Errorf("destination %s: its authentication does not decode: %w", id, err)
	}
	return a, nil
}

// patchAuth applies p to destination id's stored authentication in tx,
// checks the result and stores it, and returns what may be shown of it.
// A p that changes nothing reads nothing.
func (s *Store) patchAuth(ctx context.Context, tx pgx.Tx, id string, p AuthPatch, current AuthSummary) (AuthSummary, error) {
	if !p.changes() {
		return current, nil
	}
	if s.keys == nil {
		return current, ErrNoKeyring
	}
	rows, err := s.q.DestinationAuthGet(ctx, tx, id)
	if err != nil {
		return current, fmt.Errorf("destinations: read the authentication of %s: %w", id, err)
	}
	var old Auth
	for _, r := range rows {
		if old, err = openAuth(s.keys, id, r.KeyID, r.Sealed); err != nil {
			return current, err
		}
	}
	a := p.apply(old)
	sum, err := a.checked(time.Now())
	if err != nil {
		return current, err
	}
	// Only a changed token endpoint meets the door, as only a changed
	// URL does.
	if a.OAuth2 != nil && (old.OAuth2 == nil || old.OAuth2.TokenURL != a.OAuth2.TokenURL) {
		if err := s.checkTokenURL(ctx, a); err != nil {
			return current, err
		}
	}
	return sum, s.saveAuth(ctx, tx, id, a, sum)
}

// checkTokenURL checks a's token endpoint at the door under the Store's
// network policy, as its URL is (checkURL): a refusal is an *InputError
// naming oauth2.token_url.
func (s *Store) checkTokenURL(ctx context.Context, a Auth) error {
	if a.OAuth2 == nil {
		return nil
	}
	err := s.checkURL(ctx, a.OAuth2.TokenURL)
	var input *InputError
	if errors.As(err, &input) {
		// checkURL's errors name url: this one is the token endpoint's.
		return &InputError{msg: "oauth2.token_url" + strings.TrimPrefix(input.msg, "url")}
	}
	return err
}

// withAuth fills in what may be shown of ds' authentication.
func (s *Store) withAuth(ctx context.Context, db DB, ds []Destination) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]string, len(ds))
	at := make(map[string]int, len(ds))
	for i, d := range ds {
		ids[i], at[d.ID] = d.ID, i
		ds[i].AuthSummary = AuthSummary{Headers: map[string]string{}}
	}
	rows, err := s.q.DestinationAuthShown(ctx, db, ids)
	if err != nil {
		return fmt.Errorf("destinations: read their authentication: %w", err)
	}
	for _, r := range rows {
		var sum AuthSummary
		if err := json.Unmarshal(r.Shown, &sum); err != nil {
			return fmt.Errorf("destinations: the authentication of %s does not decode: %w", r.DestinationID, err)
		}
		if sum.Headers == nil {
			sum.Headers = map[string]string{}
		}
		ds[at[r.DestinationID]].AuthSummary = sum
	}
	return nil
}

// rekeyAuth seals again, under the keyring's current key, every
// destination's authentication sealed under another, in tx, and returns
// how many it resealed.
func (s *Store) rekeyAuth(ctx context.Context, tx pgx.Tx) (int, error) {
	rows, err := s.q.DestinationAuthSealed(ctx, tx, s.keys.Current())
	if err != nil {
		return 0, fmt.Errorf("destinations: read sealed authentication: %w", err)
	}
	n := 0
	for _, r := range rows {
		plain, err := s.keys.Open(r.KeyID, authSealedFor(r.DestinationID), r.Sealed)
		if err != nil {
			return 0, err
		}
		keyID, sealed, err := s.keys.Seal(authSealedFor(r.DestinationID), plain)
		if err != nil {
			return 0, err
		}
		done, err := s.q.DestinationAuthReseal(ctx, tx, r.DestinationID, r.KeyID, keyID, sealed)
		if err != nil {
			return 0, fmt.Errorf("destinations: reseal the authentication of %s: %w", r.DestinationID, err)
		}
		n += int(done)
	}
	return n, nil
}

// openAuth opens l's authentication, sealed under keyID (nil: it has
// none). When it cannot be opened (a key missing from EnvSecretsKey), l's
// deliveries fail with why, and are retried, as when a signing secret
// cannot be: sent without it, a request would not authenticate anyway.
func (d *Directory) openAuth(l *Live, keyID *string, sealed []byte) {
	if keyID == nil {
		return
	}
	a, err := openAuth(d.keys, l.ID, *keyID, sealed)
	if err != nil {
		if l.err == nil {
			l.err = err
		}
		d.log.Error("outbox: a destination's authentication cannot be opened; its deliveries fail until it can", "destination", l.ID, "error", err)
		return
	}
	l.auth = a
}
