package email

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxd/outboxd/core/sink"
)

var (
	_ sink.DigestSink = (*Sink)(nil)
	_ sink.RateKeyer  = (*Sink)(nil)
)

// RateKey is a delivery's recipients (to, then cc, each sorted):
// a digest goes to one set of recipients, so rows for others never share
// one, and a per_key rate limit holds per recipient list.
func (s *Sink) RateKey(d *sink.Delivery) (string, error) {
	p, err := parsePayload(d.Payload, s.cfg.To)
	if err != nil {
		return "", sink.Permanent(fmt.Errorf("email sink %q: %w", s.name, err))
	}
	return strings.Join(slices.Sorted(slices.Values(p.To)), ",") + ";" + strings.Join(slices.Sorted(slices.Values(p.Cc)), ","), nil
}

// DeliverDigest sends a digest as one mail: its digest template's payload
// when the route target has one, else a list of the members (their
// subjects and texts, in enqueue order) to their recipients, under a
// Message-ID of the digest's own, the same on every attempt. A member
// whose payload cannot be mailed is refused (sink.RefuseMembers) so the
// others go out without it.
func (s *Sink) DeliverDigest(ctx context.Context, dg *sink.Digest) error {
	var p Payload
	if dg.Payload != nil {
		var err error
		if p, err = parsePayload(dg.Payload, s.cfg.To); err != nil {
			return sink.Permanent(fmt.Errorf("email sink %q, digest %d: %w", s.name, dg.ID, err))
		}
	} else {
		members, refused := make([]Payload, len(dg.Members)), map[int]error{}
		for i, d := range dg.Members {
			m, err := parsePayload(d.Payload, s.cfg.To)
			if err == nil {
				err = s.checkRecipients(m)
			}
			if err != nil {
				refused[i] = fmt.Errorf("email sink %q, row %d: %w", s.name, d.ID, err)
			}
			members[i] = m
		}
		if len(refused) > 0 {
			return sink.RefuseMembers(refused)
		}
		p = digestMail(members)
	}
	if err := s.checkRecipients(p); err != nil {
		return sink.Permanent(fmt.Errorf("email sink %q, digest %d: %w", s.name, dg.ID, err))
	}
	receipt, err := s.mail(ctx, p, MessageID(s.name, "digest-"+strconv.FormatInt(dg.ID, 10), s.server.domain), "", dg.Members[0].CreatedAt)
	if err != nil {
		return fmt.Errorf("email sink %q, digest %d: %w", s.name, dg.ID, err)
	}
	return dg.SetReceipt(receipt)
}

// digestMail is the default mail of a digest: "N messages: <first
// subject>", and a plain-text list of the members, each its subject and
// text, to the first member's recipients (a digest's members share them,
// see RateKey).
func digestMail(members []Payload) Payload {
	p := Payload{To: members[0].To, Cc: members[0].Cc}
	p.Subject = fmt.Sprintf("%d messages: %s", len(members), members[0].Subject)
	var b strings.Builder
	for i, m := range members {
		fmt.Fprintf(&b, "%d. %s\n", i+1, m.Subject)
		if t := strings.TrimSpace(m.Text); t != "" {
			b.WriteString("   " + strings.ReplaceAll(t, "\n", "\n   ") + "\n")
		}
		b.WriteString("\n")
	}
	p.Text = b.String()
	return p
}
