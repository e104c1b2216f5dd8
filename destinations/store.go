package destinations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// Paging of List.
const (
	// DefaultPageSize is how many destinations a page holds unless asked.
	DefaultPageSize = 100
	// MaxPageSize is the most a page holds.
	MaxPageSize = 1000
)

// MaxOverlap bounds how long a rotated-out secret keeps signing.
const MaxOverlap = 30 * 24 * time.Hour

// DB runs statements and transactions: a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx (then a savepoint of it).
type DB interface {
	store.DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store manages the destinations of one outbox schema. Its keyring seals
// new secrets; a Store without one (nil) can list, change and delete
// destinations but not create them or rotate their secrets. Every change
// is recorded in the audit trail (package audit) as its actor's, in the
// change's own transaction. It enforces the tenants' quotas
// (DefaultQuotas unless WithQuotas sets others).
type Store struct {
	q     *store.Queries
	trail *audit.Trail
	keys  *Keyring
	// door is what requests are checked against; every holder of this
	// Store reads the same one, which Reconfigure replaces.
	door *atomic.Pointer[door]
}

// door is what a Store checks tenants' requests against: their quotas
// and, when set, the network policy URLs must pass (url_policy.go).
type door struct {
	quotas  Quotas
	network *Network
}

// withDoor returns a copy of s checking d, apart from s's holders.
func (s *Store) withDoor(d door) *Store {
	c := *s
	c.door = new(atomic.Pointer[door])
	c.door.Store(&d)
	return &c
}

// Reconfigure makes s enforce q and check URLs against n (nil: none at
// the door) from its next request on, for everyone holding s: serve
// calls it when a reload changes plugins.yaml's destinations block, so
// that the API, the console and the tenants' portal, which share s,
// follow the configuration the relay delivers under. Stores made from s
// with WithQuotas or WithNetwork keep what they were made with.
func (s *Store) Reconfigure(q Quotas, n *Network) {
	s.door.Store(&door{quotas: q, network: n})
}

// NewStore returns the Store of q's outbox schema, recording changes in
// trail and sealing with keys. Programs get theirs from the front door
// (outboxd.Outbox.Destinations), which makes the one store and audit trail
// its engine shares.
func NewStore(q *store.Queries, trail *audit.Trail, keys *Keyring) *Store {
	s := &Store{q: q, trail: trail, keys: keys, door: new(atomic.Pointer[door])}
	s.door.Store(&door{quotas: DefaultQuotas()})
	return s
}

// target is an audit entry's filter: the destination a change concerned.
type target struct {
	Tenant      string `json:"tenant"`
	Destination string `json:"destination"`
}

// Created is a new destination with its signing secret, shown this once.
type Created struct {
	Destination
	Secret string `json:"secret"`
}

// Create makes a destination of tenant from spec, with a fresh signing
// secret, in db (a savepoint of the caller's transaction, if it is one,
// which should then be READ COMMITTED for the quota to hold), as actor's.
// A tenant at its EndpointsPerTenant quota is refused with a *QuotaError.
func (s *Store) Create(ctx context.Context, db DB, actor audit.Actor, tenant string, spec Spec) (Created, error) {
	if err := CheckTenant(tenant); err != nil {
		return Created{}, err
	}
	c, err := spec.check()
	if err != nil {
		return Created{}, err
	}
	if err := s.checkURL(ctx, c.URL); err != nil {
		return Created{}, err
	}
	auth, err := spec.Auth.checked(time.Now())
	if err != nil {
		return Created{}, err
	}
	if err := s.checkTokenURL(ctx, spec.Auth); err != nil {
		return Created{}, err
	}
	if s.keys == nil {
		return Created{}, ErrNoKeyring
	}
	id, err := newID()
	if err != nil {
		return Created{}, err
	}
	keyID, sealed, text, err := s.newSecret(id)
	if err != nil {
		return Created{}, err
	}
	var row store.DestinationCreateRow
	err = store.ReadCommitted(ctx, db, func(tx pgx.Tx) error {
		if err := s.checkEndpoints(ctx, tx, tenant); err != nil {
			return err
		}
		if row, err = s.q.DestinationCreate(ctx, tx, id, tenant, c.URL, c.Description, c.Events, c.RateLimit, c.Metadata, keyID, sealed, c.Filter); err != nil {
			return err
		}
		if err := s.saveAuth(ctx, tx, id, spec.Auth, auth); err != nil {
			return err
		}
		return s.trail.Write(ctx, tx, actor, audit.Record{Action: audit.ActionDestinationCreate, Filter: target{tenant, id}, Count: 1,
			Detail: map[string]any{"events": nonNil(c.Events), "filter": c.Filter, "rate_limit": c.RateLimit, "auth": spec.Auth.parts()}})
	})
	if err != nil {
		return Created{}, fmt.Errorf("destinations: create a destination of tenant %s: %w", tenant, err)
	}
	return Created{Secret: text, Destination: shown(Destination{
		ID: id, Tenant: tenant, URL: c.URL, Description: c.Description, Events: nonNil(c.Events), Filter: c.Filter, RateLimit: c.RateLimit,
		Enabled: true, Metadata: c.Metadata, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, AuthSummary: auth,
	})}, nil
}

// newSecret makes a signing secret for destination id and seals it.
func (s *Store) newSecret(id string) (keyID string, sealed []byte, text string, err error) {
	_, text, err = standardwebhooks.NewSecret()
	if err != nil {
		return "", nil, "", err
	}
	keyID, sealed, err = s.keys.Seal(id, []byte(text))
	return keyID, sealed, text, err
}

// List returns a page of tenant's destinations in id order, after the id
// after ("" for the first page), and the cursor of the next page ("" when
// this one is the last).
func (s *Store) List(ctx context.Context, db DB, tenant, after string, limit int) ([]Destination, string, error) {
	limit = pageSize(limit)
	rows, err := s.q.DestinationsList(ctx, db, tenant, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("destinations: list tenant %s: %w", tenant, err)
	}
	out, next := listed(rows, limit)
	if err := s.withAuth(ctx, db, out); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// ListAll returns a page of every tenant's destinations in id order, as
// List does for one tenant: for operators, who see every tenant. Never
// use it on a tenant's behalf.
func (s *Store) ListAll(ctx context.Context, db DB, after string, limit int) ([]Destination, string, error) {
	limit = pageSize(limit)
	rows, err := s.q.DestinationsListAll(ctx, db, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("destinations: list every tenant's: %w", err)
	}
	page := make([]store.DestinationsListRow, len(rows))
	for i, r := range rows {
		page[i] = store.DestinationsListRow(r)
	}
	out, next := listed(page, limit)
	if err := s.withAuth(ctx, db, out); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// pageSize is the page size asked for, DefaultPageSize when none, at
// most MaxPageSize.
func pageSize(limit int) int {
	if limit <= 0 {
		return DefaultPageSize
	}
	return min(limit, MaxPageSize)
}

// listed is a page of limit destinations out of rows read one past it,
// and the cursor of the next page ("" when rows held no more).
func listed(rows []store.DestinationsListRow, limit int) ([]Destination, string) {
	next := ""
	if len(rows) > limit {
		rows, next = rows[:limit], rows[limit-1].ID
	}
	out := make([]Destination, len(rows))
	for i, r := range rows {
		out[i] = shown(Destination{ID: r.ID, Tenant: r.Tenant, URL: r.URL, Description: r.Description, Events: nonNil(r.Events),
			Filter: json.RawMessage(r.Filter), RateLimit: r.RateLimit, Enabled: r.Enabled, DisabledReason: r.DisabledReason, Metadata: r.Metadata,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
	}
	return out, next
}

// Get returns destination id of tenant, with how many of its rows wait.
func (s *Store) Get(ctx context.Context, db DB, tenant, id string) (Destination, error) {
	r, err := s.q.DestinationGet(ctx, db, tenant, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Destination{}, ErrNotFound
	}
	if err != nil {
		return Destination{}, fmt.Errorf("destinations: get %s of tenant %s: %w", id, tenant, err)
	}
	ds := []Destination{shown(Destination{ID: r.ID, Tenant: r.Tenant, URL: r.URL, Description: r.Description, Events: nonNil(r.Events),
		Filter: json.RawMessage(r.Filter), RateLimit: r.RateLimit, Enabled: r.Enabled, DisabledReason: r.DisabledReason, Metadata: r.Metadata,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Waiting: &r.Waiting})}
	if err := s.withAuth(ctx, db, ds); err != nil {
		return Destination{}, err
	}
	return ds[0], nil
}

// Update sets p's fields on destination id of tenant, in one transaction
// (a concurrent update of another field is not lost), as actor's, and
// returns it.
func (s *Store) Update(ctx context.Context, db DB, actor audit.Actor, tenant, id string, p Patch) (Destination, error) {
	var d Destination
	err := s.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		n, err := s.q.DestinationLock(ctx, tx, tenant, id)
		if err != nil {
			return audit.Record{}, false, fmt.Errorf("destinations: lock %s of tenant %s: %w", id, tenant, err)
		}
		if n == 0 {
			return audit.Record{}, false, ErrNotFound
		}
		if d, err = s.Get(ctx, tx, tenant, id); err != nil {
			return audit.Record{}, false, err
		}
		c, err := p.apply(d).check()
		if err != nil {
			return audit.Record{}, false, err
		}
		// Only a changed URL meets the door: one stored before the policy
		// changed still takes other edits (its deliveries are refused).
		if c.URL != d.ownURL {
			if err := s.checkURL(ctx, c.URL); err != nil {
				return audit.Record{}, false, err
			}
		}
		auth, err := s.patchAuth(ctx, tx, id, p.AuthPatch, d.AuthSummary)
		if err != nil {
			return audit.Record{}, false, err
		}
		d.UpdatedAt, err = s.q.DestinationUpdate(ctx, tx, tenant, id, c.URL, c.Description, c.Events, c.RateLimit, c.Metadata, c.Filter)
		if err != nil {
			return audit.Record{}, false, fmt.Errorf("destinations: update %s of tenant %s: %w", id, tenant, err)
		}
		d.URL, d.Description, d.Events, d.Filter, d.RateLimit, d.Metadata = c.URL, c.Description, nonNil(c.Events), c.Filter, c.RateLimit, c.Metadata
		d = shown(d)
		d.AuthSummary = auth
		// The fields' names, not their values: a URL may hold a token.
		return audit.Record{Action: audit.ActionDestinationUpdate, Filter: target{tenant, id}, Count: 1,
			Detail: map[string]any{"changed": p.fields()}}, true, nil
	})
	return d, err
}

// delete removes destination id of tenant with its secrets, its circuit
// breakers and the rows still waiting for it, as actor's, and returns how
// many rows went with it (the audit entry's count), in db
// (DeleteCounted's transaction, then a savepoint of it). Only
// DeleteCounted calls it: every delete is of what was counted first.
func (s *Store) delete(ctx context.Context, db DB, actor audit.Actor, tenant, id string) (int64, error) {
	var r store.DestinationDeleteRow
	err := s.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		var err error
		if r, err = s.q.DestinationDelete(ctx, tx, tenant, id, s.q.Channel, store.PausePrefix); err != nil {
			return audit.Record{}, false, fmt.Errorf("destinations: delete %s of tenant %s: %w", id, tenant, err)
		}
		if r.Deleted == 0 {
			return audit.Record{}, false, ErrNotFound
		}
		return audit.Record{Action: audit.ActionDestinationDelete, Filter: target{tenant, id}, Count: r.Rows,
			Detail: map[string]any{"waiting_rows_deleted": r.Rows}}, true, nil
	})
	return r.Rows, err
}

// SetEnabled enables or disables destination id of tenant (reason says
// why it is disabled), as actor's, and returns how many of its waiting
// rows moved: disabled, they wait without spending attempts; enabled,
// they are due. Disabling ends its circuit breakers: enabled again, it
// starts afresh.
func (s *Store) SetEnabled(ctx context.Context, db DB, actor audit.Actor, tenant, id string, enabled bool, reason string) (int64, error) {
	var moved int64
	// The lock first, the rows moved by a statement of its own (which READ
	// COMMITTED lets see what committed while it waited): a producer
	// parking a row for the destination meanwhile either commits before
	// the move reads the rows, or waits and finds it enabled (migration
	// 021).
	err := store.ReadCommitted(ctx, db, func(tx pgx.Tx) error {
		n, err := s.q.DestinationLock(ctx, tx, tenant, id)
		if err != nil {
			return fmt.Errorf("destinations: lock %s of tenant %s: %w", id, tenant, err)
		}
		if n == 0 {
			return ErrNotFound
		}
		if moved, err = s.q.DestinationSetEnabled(ctx, tx, tenant, id, enabled, reason, s.q.Channel, store.PausePrefix); err != nil {
			return fmt.Errorf("destinations: enable or disable %s of tenant %s: %w", id, tenant, err)
		}
		rec := audit.Record{Action: audit.ActionDestinationEnable, Filter: target{tenant, id}, Count: moved}
		if !enabled {
			rec.Action, rec.Detail = audit.ActionDestinationDisable, map[string]string{"reason": reason}
		}
		return s.trail.Write(ctx, tx, actor, rec)
	})
	return moved, err
}

// RotateSecret gives destination id of tenant a new signing secret, as
// actor's, returned this once; its current secrets keep signing for
// overlap (0: they stop at once), so receivers can switch without
// refusing a request.
func (s *Store) RotateSecret(ctx context.Context, db DB, actor audit.Actor, tenant, id string, overlap time.Duration) (string, error) {
	if overlap < 0 || overlap > MaxOverlap {
		return "", inputErrorf("overlap must be between 0 and %s, got %s", MaxOverlap, overlap)
	}
	if s.keys == nil {
		return "", ErrNoKeyring
	}
	keyID, sealed, text, err := s.newSecret(id)
	if err != nil {
		return "", err
	}
	err = s.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		if _, err := s.q.DestinationSecretAdd(ctx, tx, tenant, id, keyID, sealed, overlap); errors.Is(err, pgx.ErrNoRows) {
			return audit.Record{}, false, ErrNotFound
		} else if err != nil {
			return audit.Record{}, false, fmt.Errorf("destinations: rotate the secret of %s of tenant %s: %w", id, tenant, err)
		}
		return audit.Record{Action: audit.ActionDestinationRotateSecret, Filter: target{tenant, id}, Count: 1,
			Detail: map[string]string{"overlap": overlap.String()}}, true, nil
	})
	if err != nil {
		return "", err
	}
	return text, nil
}

// Rekey seals again, under the keyring's current key, every secret sealed
// under another of its keys, in one transaction, as actor's (recorded
// when it resealed any), and returns
// how many it resealed. Run it after putting a new key first in
// EnvSecretsKey; the old key can go once it returns without error.
func (s *Store) Rekey(ctx context.Context, db DB, actor audit.Actor) (int, error) {
	if s.keys == nil {
		return 0, ErrNoKeyring
	}
	n := 0
	err := s.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		rows, err := s.q.DestinationSecretsSealed(ctx, tx, s.keys.Current())
		if err != nil {
			return audit.Record{}, false, fmt.Errorf("destinations: read sealed secrets: %w", err)
		}
		for _, r := range rows {
			plain, err := s.keys.Open(r.KeyID, r.DestinationID, r.Sealed)
			if err != nil {
				return audit.Record{}, false, err
			}
			keyID, sealed, err := s.keys.Seal(r.DestinationID, plain)
			if err != nil {
				return audit.Record{}, false, err
			}
			done, err := s.q.DestinationSecretReseal(ctx, tx, r.DestinationID, r.Serial, r.KeyID, keyID, sealed)
			if err != nil {
				return audit.Record{}, false, fmt.Errorf("destinations: reseal a secret of %s: %w", r.DestinationID, err)
			}
			n += int(done)
		}
		resealed, err := s.rekeyAuth(ctx, tx)
		if err != nil {
			return audit.Record{}, false, err
		}
		n += resealed
		// A rekey that found nothing to reseal changed nothing.
		return audit.Record{Action: audit.ActionDestinationsRekey, Count: int64(n),
			Detail: map[string]string{"key": s.keys.Current()}}, n > 0, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Delivery is one row of a destination with its attempts, as GET
// .../deliveries shows it.
// It is a message as a search lists it, with its failed attempts.
type Delivery struct {
	operator.MessageSummary
	FailedAttempts json.RawMessage `json:"failed_attempts"`
	// LastAttempt is the details of the row's last attempt (its delivery,
	// once delivered): start, duration, the receiver's status and answer.
	LastAttempt *operator.AttemptDetails `json:"last_attempt,omitempty"`
}

// Deliveries returns destination id's rows newest first, at most limit
// with ids below before (0: from the newest), each with every failed
// attempt, and the cursor of the next page (0 after the last).
func (s *Store) Deliveries(ctx context.Context, db DB, tenant, id string, before int64, limit int) ([]Delivery, int64, error) {
	if n, err := s.q.DestinationExists(ctx, db, tenant, id); err != nil {
		return nil, 0, fmt.Errorf("destinations: find %s of tenant %s: %w", id, tenant, err)
	} else if n == 0 {
		return nil, 0, ErrNotFound
	}
	limit = pageSize(limit)
	var cursor *int64
	if before > 0 {
		cursor = &before
	}
	rows, err := s.q.DestinationDeliveries(ctx, db, id, cursor, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("destinations: deliveries of %s: %w", id, err)
	}
	var next int64
	if len(rows) > limit {
		rows, next = rows[:limit], rows[limit-1].ID
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		var last *operator.AttemptDetails
		if r.LastAttempt != nil && string(*r.LastAttempt) != "null" {
			last = new(operator.AttemptDetails)
			if err := json.Unmarshal(*r.LastAttempt, last); err != nil {
				return nil, 0, fmt.Errorf("destinations: the last attempt of row %d: %w", r.ID, err)
			}
		}
		out[i] = Delivery{FailedAttempts: r.FailedAttempts, LastAttempt: last, MessageSummary: operator.MessageSummary{ID: r.ID, Sink: r.Sink,
			DedupKey: r.DedupKey, Status: status.Row(r.Status), Attempts: r.Attempts, CreatedAt: r.CreatedAt,
			UpdatedAt: r.UpdatedAt, SentAt: r.SentAt, LastError: r.LastError}}
	}
	return out, next, nil
}
