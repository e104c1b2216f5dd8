package destinations

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/internal/safetext"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// Bounds of what a destination holds.
const (
	// MaxTenantBytes bounds a tenant id, as a dedup key is bounded.
	MaxTenantBytes = 255
	// MaxURLBytes bounds a destination's URL.
	MaxURLBytes = 2048
	// MaxDescriptionBytes bounds its description.
	MaxDescriptionBytes = 1024
	// MaxEvents bounds how many event patterns it subscribes to, each
	// bounded by MaxPatternBytes and MaxPatternSegments: a publish for its
	// tenant tries each. event_pattern_bounds() (migration 027) declares
	// it too, as max_patterns.
	MaxEvents = 100
	// MaxMetadataBytes bounds its metadata's JSON.
	MaxMetadataBytes = 16384
	// IDPrefix starts every destination id.
	IDPrefix = "dst_"
	// MinRateLimit and MaxRateLimit bound a destination's rate limit, in
	// deliveries per second: from one every quarter of an hour or so to
	// one per microsecond, the finest spacing the relay's limiter keeps.
	MinRateLimit = 0.001
	MaxRateLimit = 1_000_000
)

// Header is the row header naming the destination a row is for: set by
// publish's fan-out and enqueue_destination() (migration 016), read by
// the destinations sink, never sent to the receiver.
const Header = "outboxd-destination"

// RevisionHeader is the row header holding the destinations' revision its
// producer saw (destinations_state's, migration 025), set beside Header:
// the sink delivers the row once its directory has read that revision
// (Directory.FindAtRevision). Never sent to the receiver.
const RevisionHeader = "outboxd-destinations-revision"

// Destination is one endpoint of a tenant, as the API shows it. Its
// secrets are never part of it.
type Destination struct {
	ID          string `json:"id"`
	Tenant      string `json:"tenant"`
	URL         string `json:"url"`
	Description string `json:"description"`
	// Events are the subscribed event-type patterns; empty means every
	// type.
	Events []string `json:"events"`
	// Filter is the payload filter an event of those types must match
	// too (CheckFilter); null: none.
	Filter json.RawMessage `json:"filter"`
	// RateLimit is deliveries per second; nil takes the sink's default.
	RateLimit      *float64        `json:"rate_limit"`
	Enabled        bool            `json:"enabled"`
	DisabledReason string          `json:"disabled_reason,omitempty"`
	Metadata       json.RawMessage `json:"metadata"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	// Waiting is how many of its rows wait for delivery (Get only).
	Waiting *int64 `json:"waiting,omitempty"`
	// AuthSummary shows how its requests authenticate besides the
	// signature (headers, oauth2, tls_client_cert), never a secret value.
	AuthSummary
	// ownURL is the URL unredacted, for its tenant's own edit form.
	ownURL string
}

// OwnURL is d's URL as its tenant set it, credentials included (URL has
// them redacted, see RedactURL): for the tenant's own edit form in its
// portal, never for another reader.
func (d Destination) OwnURL() string { return d.ownURL }

// shown is d as the store hands it out: its URL redacted, the URL as set
// kept for OwnURL.
func shown(d Destination) Destination {
	d.ownURL, d.URL = d.URL, RedactURL(d.URL)
	return d
}

// Spec is what a new destination is made of (the body of POST
// /v1/tenants/{tenant}/destinations).
type Spec struct {
	URL         string          `json:"url"`
	Events      []string        `json:"events"`
	Filter      json.RawMessage `json:"filter,omitempty"`
	Description string          `json:"description"`
	RateLimit   *float64        `json:"rate_limit"`
	Metadata    json.RawMessage `json:"metadata"`
	// Auth is how its requests authenticate besides the signature
	// (headers, oauth2, tls_client_cert), sealed once stored.
	Auth
}

// Patch changes some fields of a destination (the body of PATCH): the
// ones set. A Filter of {} removes the destination's filter.
type Patch struct {
	URL         *string          `json:"url"`
	Events      *[]string        `json:"events"`
	Filter      *json.RawMessage `json:"filter"`
	Description *string          `json:"description"`
	RateLimit   *float64         `json:"rate_limit"`
	Metadata    *json.RawMessage `json:"metadata"`
	// AuthPatch changes its authentication (headers, oauth2,
	// tls_client_cert) as a JSON merge patch does.
	AuthPatch
}

// InputError is a destination or request refused for what it holds; its
// message names the field and never repeats a URL.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// ErrNotFound is returned for a destination the tenant does not have.
var ErrNotFound = errors.New("destinations: no such destination")

// CheckTenant reports whether tenant can own destinations: not empty, at
// most MaxTenantBytes, printable.
func CheckTenant(tenant string) error {
	switch {
	case tenant == "":
		return inputErrorf("tenant is empty")
	case len(tenant) > MaxTenantBytes:
		return inputErrorf("tenant is %d bytes, over the limit of %d", len(tenant), MaxTenantBytes)
	case safetext.Text(tenant, MaxTenantBytes) != tenant:
		return inputErrorf("tenant %q holds characters that are not printable", safetext.Text(tenant, MaxTenantBytes))
	}
	return nil
}

// checked is a Spec validated, its defaults filled in.
type checked struct {
	Spec
}

func (s Spec) check() (checked, error) {
	c := checked{Spec: s}
	if len(s.URL) > MaxURLBytes {
		return c, inputErrorf("url is %d bytes, over the limit of %d", len(s.URL), MaxURLBytes)
	}
	if err := standardwebhooks.CheckURL(s.URL); err != nil {
		return c, inputErrorf("url: %v", err)
	}
	if len(s.Description) > MaxDescriptionBytes {
		return c, inputErrorf("description is %d bytes, over the limit of %d", len(s.Description), MaxDescriptionBytes)
	}
	if err := checkPatterns(s.Events); err != nil {
		return c, err
	}
	filter, err := CheckFilter(s.Filter)
	if err != nil {
		return c, err
	}
	c.Filter = filter
	if r := s.RateLimit; r != nil && !(*r >= MinRateLimit && *r <= MaxRateLimit) {
		return c, inputErrorf("rate_limit must be a number of deliveries per second between %g and %g, got %v", float64(MinRateLimit), float64(MaxRateLimit), *r)
	}
	if len(s.Metadata) == 0 || string(s.Metadata) == "null" {
		c.Metadata = json.RawMessage("{}")
	}
	if len(c.Metadata) > MaxMetadataBytes {
		return c, inputErrorf("metadata is %d bytes, over the limit of %d", len(c.Metadata), MaxMetadataBytes)
	}
	var obj map[string]any
	if err := json.Unmarshal(c.Metadata, &obj); err != nil || obj == nil {
		return c, inputErrorf("metadata must be a JSON object")
	}
	return c, nil
}

// fields names the fields p sets, as JSON names them.
func (p Patch) fields() []string {
	var names []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"url", p.URL != nil}, {"events", p.Events != nil}, {"filter", p.Filter != nil}, {"description", p.Description != nil},
		{"rate_limit", p.RateLimit != nil}, {"metadata", p.Metadata != nil}} {
		if f.set {
			names = append(names, f.name)
		}
	}
	return append(names, p.AuthPatch.fields()...)
}

// apply returns d's spec with p's fields set over it.
func (p Patch) apply(d Destination) Spec {
	s := Spec{URL: d.ownURL, Events: d.Events, Filter: d.Filter, Description: d.Description, RateLimit: d.RateLimit, Metadata: d.Metadata}
	// The URL shown (redacted) sent back unchanged, as an edit form
	// does, keeps the URL as set.
	if p.URL != nil && *p.URL != d.URL {
		s.URL = *p.URL
	}
	if p.Events != nil {
		s.Events = *p.Events
	}
	if p.Filter != nil {
		s.Filter = *p.Filter
	}
	if p.Description != nil {
		s.Description = *p.Description
	}
	if p.RateLimit != nil {
		s.RateLimit = p.RateLimit
	}
	if p.Metadata != nil {
		s.Metadata = *p.Metadata
	}
	return s
}

// idEncoding spells ids in lower-case base32, without padding.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID makes a destination id: IDPrefix and 80 random bits.
func newID() (string, error) {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a destination id: %w", err)
	}
	return IDPrefix + idEncoding.EncodeToString(b), nil
}

// nonNil makes a nil list an empty one, as JSON shows it.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
