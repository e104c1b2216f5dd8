package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/api"
)

// destinationRecoverCommand is destructive (see destructive): it counts
// the window's events first and, unless --yes, asks on a terminal and
// refuses elsewhere, as dlq redrive does.
func (a *app) destinationRecoverCommand() *cobra.Command {
	var (
		f                destinationFlags
		d                destructive
		since, until     string
		includeDelivered bool
	)
	const name = "destinations recover"
	c := a.destinationCommand("recover ID --tenant T --since TIME [--until TIME] [--include-delivered] [--dry-run] [--yes]",
		"Send a destination's events of a window again: dead ones, or delivered ones too (counted first; asks on a terminal unless --yes)",
		`  outboxd destinations recover dst_kx2m4fq7rj3v5wzp --tenant acme --since 2026-01-02T14:00:00Z --dry-run
  outboxd destinations recover dst_kx2m4fq7rj3v5wzp --tenant acme --since 2h --include-delivered --yes`,
		cobra.ExactArgs(1), true, &f, func(ctx context.Context, st *destinations.Store, s session, args []string) (any, error) {
			id := args[0]
			window, err := recoverWindow(since, until, includeDelivered, time.Now())
			if err != nil {
				return nil, err
			}
			// Counted first, sent again with the count's token, as the
			// API does: an event that dies or is delivered after the
			// count stops the recovery.
			counted, err := st.CountRecover(ctx, s.pool, f.tenant, id, window)
			if err != nil {
				return nil, err
			}
			if d.dryRun {
				return api.RecoverAnswer{ID: id, RecoverCount: counted, DryRun: true}, nil
			}
			if counted.Rows == 0 {
				return api.RecoverAnswer{ID: id, RecoverCount: counted}, nil
			}
			if d.asks() {
				if err := a.approve(name, fmt.Sprintf("send again %d event(s) of destination %s of tenant %s (%d dead, %d delivered)?",
					counted.Rows, id, f.tenant, counted.Dead, counted.Delivered)); err != nil {
					return nil, err
				}
			}
			done, err := st.Recover(ctx, s.pool, a.actor(), f.tenant, id, window, counted.Token)
			if errors.Is(err, destinations.ErrRecoveryChanged) {
				return nil, fmt.Errorf("%s: nothing sent again: %w (now %d event(s)); run it again", name, err, done.Rows)
			}
			done.Token = ""
			return api.RecoverAnswer{ID: id, RecoverCount: done, Recovered: done.Rows}, err
		})
	check := c.PreRunE
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return err
		}
		if _, err := recoverWindow(since, until, includeDelivered, time.Now()); err != nil {
			return badInput(err)
		}
		return d.check(a, name)
	}
	c.Flags().StringVar(&since, "since", "", "send again the events created from this `time` on: RFC 3339 (2026-01-02T14:00:00Z), or a duration ago (2h) (required)")
	c.Flags().StringVar(&until, "until", "", "and created before this `time` (RFC 3339 or a duration ago); default: now")
	c.Flags().BoolVar(&includeDelivered, "include-delivered", false, "the delivered events too, as long as the history keeps them (history.retention), not only the dead ones")
	d.add(c, "sent again")
	c.Long = `Sends a destination's events of a window again: those created from --since
(and before --until) that died, and with --include-delivered those
delivered too, while the history keeps them. Each goes out under its
original delivery id (webhook-id), so a receiver that de-duplicates drops
what it already has. It counts first; --dry-run only counts. On a terminal
it asks before sending, unless --yes; without a terminal it sends only
with --yes (without it, exit 2). It sends exactly what it counted: when an
event died, was delivered or left the history between the count and the
recovery, it sends nothing and says so (exit 1); run it again. Recorded in
the audit trail.`
	return c
}

// recoverWindow reads --since and --until: RFC 3339 times, or durations
// before now.
func recoverWindow(since, until string, includeDelivered bool, now time.Time) (destinations.Recovery, error) {
	r := destinations.Recovery{IncludeDelivered: includeDelivered}
	if since == "" {
		return r, errors.New("--since: required: an RFC 3339 time (2026-01-02T14:00:00Z) or a duration ago (2h)")
	}
	var err error
	if r.Since, err = pointInTime("--since", since, now); err != nil {
		return r, err
	}
	if until != "" {
		t, err := pointInTime("--until", until, now)
		if err != nil {
			return r, err
		}
		r.Until = &t
	}
	return r, nil
}

// pointInTime reads flag's value: an RFC 3339 time, or a duration ago.
func pointInTime(flag, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s: want an RFC 3339 time (2026-01-02T14:00:00Z) or a duration ago (2h), got %q", flag, v)
}

// writeRecovery prints a recovery's count or outcome.
func writeRecovery(w io.Writer, v api.RecoverAnswer) {
	switch {
	case v.DryRun:
		fmt.Fprintf(w, "%s: %d event(s) would be sent again (%d dead, %d delivered)\n", v.ID, v.Rows, v.Dead, v.Delivered)
	case v.Rows == 0:
		fmt.Fprintf(w, "%s: nothing to send again in that window\n", v.ID)
	default:
		fmt.Fprintf(w, "%s: %d event(s) sent again (%d dead, %d delivered)\n", v.ID, v.Recovered, v.Dead, v.Delivered)
	}
}
