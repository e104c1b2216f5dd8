package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server"
	"github.com/outboxd/outboxd/server/api"
	"github.com/outboxd/outboxd/server/portal"
)

// The destinations commands: tenants' webhook endpoints managed as data
// (docs/destinations.md), straight against the database as the other
// operator commands are.

// destinationFlags holds what every destinations command shares.
type destinationFlags struct {
	tenant string
	out    output
}

func (f *destinationFlags) add(c *cobra.Command, needsTenant bool) {
	addOutputFlags(c, &f.out, "the API's JSON")
	if needsTenant {
		c.Flags().StringVar(&f.tenant, "tenant", "", "the `tenant` owning the destination (required)")
	}
}

// check validates the flags, and then the command's own (more), before
// anything connects.
func (f *destinationFlags) check(needsTenant bool, more ...func() error) func(*cobra.Command, []string) error {
	return checkOutput(&f.out, func(*cobra.Command, []string) error {
		if needsTenant {
			if err := destinations.CheckTenant(f.tenant); err != nil {
				return badInput(err)
			}
		}
		for _, check := range more {
			if err := check(); err != nil {
				return badInput(err)
			}
		}
		return nil
	})
}

// destinationStore is the session's Store, sealing with the keys of
// destinations.EnvSecretsKey when it is set, enforcing the quotas and
// checking URLs against the network policy at the door, as serve's.
func (a *app) destinationStore(s session) (*destinations.Store, error) {
	keys, err := server.Keyring(a.io.Env)
	if err != nil {
		return nil, err
	}
	return s.ob.Destinations(keys).WithQuotas(s.cfg.DestinationQuotas()).WithNetwork(s.cfg.DestinationNetwork()), nil
}

// destinationCommand builds one subcommand running fn with the store.
func (a *app) destinationCommand(use, short, example string, args cobra.PositionalArgs, needsTenant bool, f *destinationFlags,
	fn func(ctx context.Context, st *destinations.Store, s session, args []string) (any, error)) *cobra.Command {
	c := &cobra.Command{
		Use: use, Short: short, Example: example, Args: args,
		PreRunE: f.check(needsTenant),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			st, err := a.destinationStore(s)
			if err != nil {
				return err
			}
			out, err := fn(cmd.Context(), st, s, cmd.Flags().Args())
			var input *destinations.InputError
			switch {
			case errors.Is(err, destinations.ErrNotFound):
				return notFound(err)
			case errors.As(err, &input), errors.Is(err, destinations.ErrNoKeyring):
				return badInput(err)
			case err != nil:
				return err
			}
			return writeDestinationOutput(a.io.Out, f.out.format, out)
		}),
	}
	f.add(c, needsTenant)
	return c
}

func (a *app) destinationsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "destinations",
		Short: "Manage tenants' webhook destinations: create, list, change, disable, rotate secrets",
		Example: `  export OUTBOXD_SECRETS_KEY="$(outboxd destinations keygen --id k1)"
  outboxd destinations create --tenant acme --url https://hooks.acme.example/outboxd --events 'order.*'
  outboxd destinations list --tenant acme -o wide`,
	}
	c.AddCommand(a.destinationCreateCommand(), a.destinationListCommand(), a.destinationGetCommand(),
		a.destinationUpdateCommand(), a.destinationDeleteCommand(), a.destinationRotateCommand(),
		a.destinationSetEnabledCommand(false), a.destinationSetEnabledCommand(true),
		a.destinationTestEventCommand(), a.destinationRekeyCommand(), a.destinationKeygenCommand(), a.destinationPortalCommand(),
		a.destinationRecoverCommand())
	return c
}

// specFlags are the fields create and update set.
type specFlags struct {
	url, description, metadata, filter string
	events                             []string
	rateLimit                          float64
}

func (sf *specFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&sf.url, "url", "", "the endpoint's `URL`, http or https")
	c.Flags().StringSliceVar(&sf.events, "events", nil, "subscribed event-type `patterns`, comma-separated (order.*, **; default every type)")
	c.Flags().StringVar(&sf.filter, "filter", "", "a payload filter, a `JSON` object the event must match too, as in '{\"data.amount\": {\"$gt\": 1000}}' ({} removes it; docs/destinations.md)")
	c.Flags().StringVar(&sf.description, "description", "", "a `text` saying what the destination is, for people")
	c.Flags().Float64Var(&sf.rateLimit, "rate-limit", 0, "`deliveries` per second (default the sink's)")
	c.Flags().StringVar(&sf.metadata, "metadata", "", "a `JSON` object kept with the destination")
}

func (a *app) destinationCreateCommand() *cobra.Command {
	var (
		f  destinationFlags
		sf specFlags
		af authFlags
	)
	c := a.destinationCommand("create --tenant T --url URL", "Create a destination; prints its signing secret, shown this once",
		`  outboxd destinations create --tenant acme --url https://hooks.acme.example/outboxd
  outboxd destinations create --tenant acme --url https://hooks.acme.example/orders \
    --events 'order.*,invoice.paid' --description "acme production" --rate-limit 5 \
    --metadata '{"plan": "pro"}' -o json
  outboxd destinations create --tenant acme --url https://hooks.acme.example/big-invoices \
    --events invoice.paid --filter '{"data.amount": {"$gt": 1000}, "data.currency": "EUR"}'`,
		cobra.NoArgs, true, &f, func(ctx context.Context, st *destinations.Store, s session, _ []string) (any, error) {
			spec := destinations.Spec{URL: sf.url, Events: sf.events, Description: sf.description, Metadata: json.RawMessage(sf.metadata),
				Filter: json.RawMessage(sf.filter)}
			if sf.rateLimit != 0 {
				spec.RateLimit = &sf.rateLimit
			}
			var err error
			if spec.Auth, err = af.auth(); err != nil {
				return nil, err
			}
			return st.Create(ctx, s.pool, a.actor(), f.tenant, spec)
		})
	sf.add(c)
	af.add(c, false)
	return c
}

func (a *app) destinationListCommand() *cobra.Command {
	var (
		f     destinationFlags
		after string
		limit int
	)
	c := a.destinationCommand("list --tenant T", "List a tenant's destinations, a page at a time",
		`  outboxd destinations list --tenant acme
  outboxd destinations list --tenant acme --limit 50 --after dst_kx2m4fq7rj3v5wzp -o wide`,
		cobra.NoArgs, true, &f, func(ctx context.Context, st *destinations.Store, s session, _ []string) (any, error) {
			ds, next, err := st.List(ctx, s.pool, f.tenant, after, limit)
			return destinationList{Destinations: ds, Next: next}, err
		})
	c.Flags().StringVar(&after, "after", "", "start after this destination `id` (the previous page's next)")
	c.Flags().IntVar(&limit, "limit", destinations.DefaultPageSize, "`destinations` per page")
	return c
}

// destinationList is list's output: as the API's page.
type destinationList struct {
	Destinations []destinations.Destination `json:"destinations"`
	Next         string                     `json:"next"`
}

func (a *app) destinationGetCommand() *cobra.Command {
	var f destinationFlags
	return a.destinationCommand("get ID --tenant T", "Show a destination, with how many of its rows wait",
		`  outboxd destinations get dst_kx2m4fq7rj3v5wzp --tenant acme
  outboxd destinations get dst_kx2m4fq7rj3v5wzp --tenant acme -o json`,
		cobra.ExactArgs(1), true, &f, func(ctx context.Context, st *destinations.Store, s session, args []string) (any, error) {
			return st.Get(ctx, s.pool, f.tenant, args[0])
		})
}

func (a *app) destinationUpdateCommand() *cobra.Command {
	var (
		f  destinationFlags
		sf specFlags
		af authFlags
		c  *cobra.Command
	)
	c = a.destinationCommand("update ID --tenant T [--url U] [--events E] ...", "Change the fields given of a destination",
		`  outboxd destinations update dst_kx2m4fq7rj3v5wzp --tenant acme --url https://hooks.acme.example/v2
  outboxd destinations update dst_kx2m4fq7rj3v5wzp --tenant acme --events 'order.*' --rate-limit 10
  outboxd destinations update dst_kx2m4fq7rj3v5wzp --tenant acme --filter '{"type": {"$prefix": "order."}}'`,
		cobra.ExactArgs(1), true, &f, func(ctx context.Context, st *destinations.Store, s session, args []string) (any, error) {
			var p destinations.Patch
			set := c.Flags().Changed
			if set("url") {
				p.URL = &sf.url
			}
			if set("events") {
				p.Events = &sf.events
			}
			if set("filter") {
				m := json.RawMessage(sf.filter)
				p.Filter = &m
			}
			if set("description") {
				p.Description = &sf.description
			}
			if set("rate-limit") {
				p.RateLimit = &sf.rateLimit
			}
			if set("metadata") {
				m := json.RawMessage(sf.metadata)
				p.Metadata = &m
			}
			var err error
			if p.AuthPatch, err = af.patch(); err != nil {
				return nil, err
			}
			return st.Update(ctx, s.pool, a.actor(), f.tenant, args[0], p)
		})
	sf.add(c)
	af.add(c, true)
	return c
}

// destinationChange is what delete, disable and enable print; a delete's
// dry run says what a delete would take.
type destinationChange struct {
	ID     string `json:"id"`
	Rows   int64  `json:"rows"`
	DryRun bool   `json:"dry_run,omitempty"`
	Verb   string `json:"-"`
}

// destinationDeleteCommand is destructive (see destructive): it counts the
// destination's waiting rows first and, unless --yes, asks on a terminal
// and refuses elsewhere.
func (a *app) destinationDeleteCommand() *cobra.Command {
	var (
		f destinationFlags
		d destructive
	)
	const name = "destinations delete"
	c := a.destinationCommand("delete ID --tenant T [--dry-run] [--yes]",
		"Delete a destination, its secrets and the rows still waiting for it, counted first (asks on a terminal unless --yes)",
		`  outboxd destinations delete dst_kx2m4fq7rj3v5wzp --tenant acme --dry-run
  outboxd destinations delete dst_kx2m4fq7rj3v5wzp --tenant acme
  outboxd destinations delete dst_kx2m4fq7rj3v5wzp --tenant acme --yes`,
		cobra.ExactArgs(1), true, &f, func(ctx context.Context, st *destinations.Store, s session, args []string) (any, error) {
			id := args[0]
			// Counted first, deleted with the count's token, as the API
			// does: a row that arrives after the count stops the delete.
			counted, err := st.CountDelete(ctx, s.pool, f.tenant, id)
			if err != nil {
				return nil, err
			}
			if d.dryRun {
				return destinationChange{ID: id, Rows: counted.Rows, DryRun: true, Verb: "would be deleted, with its secrets and waiting rows"}, nil
			}
			if d.asks() {
				dest, err := st.Get(ctx, s.pool, f.tenant, id)
				if err != nil {
					return nil, err
				}
				if err := a.approve(name, fmt.Sprintf("delete destination %s of tenant %s (%s), its signing secrets and its %d waiting row(s)?",
					id, f.tenant, terminalText(dest.URL), counted.Rows)); err != nil {
					return nil, err
				}
			}
			done, err := st.DeleteCounted(ctx, s.pool, a.actor(), f.tenant, id, counted.Token)
			if errors.Is(err, destinations.ErrCountChanged) {
				return nil, fmt.Errorf("%s: nothing deleted: %w (now %d waiting row(s)); run it again", name, err, done.Rows)
			}
			return destinationChange{ID: id, Rows: done.Rows, Verb: "deleted; waiting rows deleted with it"}, err
		})
	check := c.PreRunE
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return err
		}
		return d.check(a, name)
	}
	d.add(c, "deleted")
	c.Long = `Deletes a destination, its signing secrets and the rows still waiting for
it. It counts the waiting rows first; --dry-run only counts. On a terminal
it asks before deleting, unless --yes; without a terminal it deletes only
with --yes (without it, exit 2). It deletes exactly what it counted: when
rows arrived or left between the count and the delete, it deletes nothing
and says so (exit 1); run it again.`
	return c
}

func (a *app) destinationSetEnabledCommand(enable bool) *cobra.Command {
	var (
		f      destinationFlags
		reason string
	)
	use, short, verb := "disable ID --tenant T [--reason R]", "Disable a destination: its rows wait, none is dead-lettered", "disabled; rows now waiting"
	example := `  outboxd destinations disable dst_kx2m4fq7rj3v5wzp --tenant acme --reason "endpoint moving to a new host"`
	if enable {
		use, short, verb = "enable ID --tenant T", "Enable a destination: its waiting rows are delivered", "enabled; waiting rows now due"
		example = `  outboxd destinations enable dst_kx2m4fq7rj3v5wzp --tenant acme`
	}
	c := a.destinationCommand(use, short, example, cobra.ExactArgs(1), true, &f,
		func(ctx context.Context, st *destinations.Store, s session, args []string) (any, error) {
			if !enable && reason == "" {
				reason = "disabled by " + a.actor().Name
			}
			n, err := st.SetEnabled(ctx, s.pool, a.actor(), f.tenant, args[0], enable, reason)
			return destinationChange{ID: args[0], Rows: n, Verb: verb}, err
		})
	if !enable {
		c.Flags().StringVar(&reason, "reason", "", "a `text` saying why, shown with the destination")
	}
	return c
}

// rotated is what rotate-secret prints.
type rotated struct {
	ID          string    `json:"id"`
	Secret      string    `json:"secret"`
	OldExpireAt time.Time `json:"old_secrets_expire_at"`
}

func (a *app) destinationRotateCommand() *cobra.Command {
	var (
		f       destinationFlags
		overlap time.Duration
	)
	c := a.destinationCommand("rotate-secret ID --tenant T [--overlap 24h]", "Give a destination a new signing secret; the old one keeps signing for --overlap",
		`  outboxd destinations rotate-secret dst_kx2m4fq7rj3v5wzp --tenant acme --overlap 24h
  outboxd destinations rotate-secret dst_kx2m4fq7rj3v5wzp --tenant acme -o json`,
		cobra.ExactArgs(1), true, &f, func(ctx context.Context, st *destinations.Store, s session, args []string) (any, error) {
			now := time.Now()
			secret, err := st.RotateSecret(ctx, s.pool, a.actor(), f.tenant, args[0], overlap)
			return rotated{ID: args[0], Secret: secret, OldExpireAt: now.Add(overlap).UTC()}, err
		})
	c.Flags().DurationVar(&overlap, "overlap", 0, "the `duration` the old secrets keep signing beside the new one")
	return c
}

// destinationTestEventCommand sends a test event, as the console's and
// the portal's button does, within the tenant's quota of test events.
func (a *app) destinationTestEventCommand() *cobra.Command {
	var (
		f         destinationFlags
		eventType string
	)
	c := a.destinationCommand("test-event ID --tenant T [--type TYPE]",
		"Send a destination a test event (type "+destinations.TestEventType+", or a type of the event_types catalog with its example), delivered as any row is",
		`  outboxd destinations test-event dst_kx2m4fq7rj3v5wzp --tenant acme
  outboxd destinations test-event dst_kx2m4fq7rj3v5wzp --tenant acme --type invoice.paid -o json`,
		cobra.ExactArgs(1), true, &f, func(ctx context.Context, st *destinations.Store, s session, args []string) (any, error) {
			if eventType == "" {
				return st.SendTestEvent(ctx, s.pool, a.actor(), f.tenant, args[0], s.cfg.TestEventSink(), time.Now())
			}
			et, ok := s.cfg.EventTypes().Lookup(eventType)
			if !ok {
				return nil, badInput(fmt.Errorf("--type %q: not an event type of the catalog (plugins.yaml event_types, or outboxd's operational events)", eventType))
			}
			return st.SendExample(ctx, s.pool, a.actor(), f.tenant, args[0], s.cfg.TestEventSink(), et, time.Now())
		})
	c.Flags().StringVar(&eventType, "type", "", "send an event of this `type` of the catalog, its example as data (default: "+destinations.TestEventType+")")
	return c
}

// rekeyed is what rekey prints.
type rekeyed struct {
	Resealed int    `json:"resealed"`
	Key      string `json:"key"`
}

func (a *app) destinationRekeyCommand() *cobra.Command {
	var f destinationFlags
	return a.destinationCommand("rekey", "Seal every signing secret again under the first key of "+destinations.EnvSecretsKey,
		`  export OUTBOXD_SECRETS_KEY="$(outboxd destinations keygen --id k2),$OUTBOXD_SECRETS_KEY"
  outboxd destinations rekey`,
		cobra.NoArgs, false, &f, func(ctx context.Context, st *destinations.Store, s session, _ []string) (any, error) {
			n, err := st.Rekey(ctx, s.pool, a.actor())
			keys, _ := destinations.KeyringFromEnv(a.io.Env)
			out := rekeyed{Resealed: n}
			if keys != nil {
				out.Key = keys.Current()
			}
			return out, err
		})
}

func (a *app) destinationKeygenCommand() *cobra.Command {
	var id string
	c := &cobra.Command{
		Use:   "keygen [--id K]",
		Short: "Print a new random key for " + destinations.EnvSecretsKey,
		Example: `  outboxd destinations keygen
  export OUTBOXD_SECRETS_KEY="$(outboxd destinations keygen --id k1)"`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			k, err := destinations.NewKey(id)
			if err != nil {
				return badInput(err)
			}
			_, err = fmt.Fprintln(a.io.Out, k)
			return err
		},
	}
	c.Flags().StringVar(&id, "id", "k"+time.Now().UTC().Format("20060102"), "the key's `id`, stored beside each secret it seals")
	return c
}

// defaultPortalBase is where portal links point unless --base-url says:
// serve's default listen address, which is right on the host serve runs
// on only.
const defaultPortalBase = "http://" + config.DefaultListen

func (a *app) destinationPortalCommand() *cobra.Command {
	var (
		f         destinationFlags
		expiresIn time.Duration
		base      string
	)
	c := &cobra.Command{
		Use:   "portal --tenant T [--expires-in 1h] [--base-url URL]",
		Short: "Print a signed link to a tenant's portal, where the customer manages its own endpoints until the link expires",
		Example: `  outboxd destinations portal --tenant acme --base-url https://outboxd.example.com
  outboxd destinations portal --tenant acme --expires-in 15m --base-url https://outboxd.example.com -o json`,
		Args: cobra.NoArgs,
		PreRunE: f.check(true, func() error {
			if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
				return fmt.Errorf("--base-url %q: want the scheme and host outboxd serves at, such as https://outboxd.example.com", base)
			}
			return nil
		}, func() error {
			if err := portal.CheckLifetime(expiresIn); err != nil {
				return fmt.Errorf("--expires-in: %w", err)
			}
			return nil
		}),
		// The link is recorded in the audit trail before it is printed:
		// whoever mints one can act as the tenant until it expires.
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			links, err := server.PortalLinks(a.io.Env)
			if err != nil {
				return err
			}
			if links == nil {
				return badInput(destinations.ErrNoKeyring)
			}
			who := a.actor()
			link, expires, err := links.Link(base, f.tenant, who.Name, time.Now().Add(expiresIn))
			if err != nil {
				return badInput(err)
			}
			st, err := a.destinationStore(s)
			if err != nil {
				return err
			}
			if err := st.RecordPortalLink(cmd.Context(), s.pool, who, f.tenant, expires); err != nil {
				return err
			}
			return writeDestinationOutput(a.io.Out, f.out.format, api.PortalLink{URL: link, ExpiresAt: expires})
		}),
	}
	f.add(c, true)
	c.Flags().DurationVar(&expiresIn, "expires-in", portal.DefaultLinkLifetime,
		fmt.Sprintf("the `duration` the link and the session it opens last, at most %s", portal.MaxLinkLifetime))
	c.Flags().StringVar(&base, "base-url", defaultPortalBase, "the `URL` customers reach outboxd's HTTP API at: its scheme and host")
	return c
}

// writeDestinationOutput prints v as -o asks.
func writeDestinationOutput(w io.Writer, format string, v any) error {
	if format == outputJSON {
		return writeJSON(w, v)
	}
	wide := format == outputWide
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch v := v.(type) {
	case destinations.Created:
		writeDestinationRows(tw, wide, v.Destination)
		writeAuthSummary(tw, v.AuthSummary)
		fmt.Fprintf(tw, "\nsecret: %s\n(shown this once: give it to the receiver now)\n", v.Secret)
	case destinations.Destination:
		writeDestinationRows(tw, wide, v)
		if v.Waiting != nil {
			fmt.Fprintf(tw, "\nwaiting rows: %d\n", *v.Waiting)
		}
		writeAuthSummary(tw, v.AuthSummary)
	case destinationList:
		writeDestinationRows(tw, wide, v.Destinations...)
		if v.Next != "" {
			fmt.Fprintf(tw, "\nmore: --after %s\n", v.Next)
		}
	case destinationChange:
		fmt.Fprintf(tw, "%s %s (%d rows)\n", v.ID, v.Verb, v.Rows)
	case rotated:
		fmt.Fprintf(tw, "%s: new secret %s\n(shown this once; the old secrets sign until %s)\n", v.ID, v.Secret, v.OldExpireAt.Format(time.RFC3339))
	case destinations.TestEvent:
		fmt.Fprintf(tw, "test event sent as message %d (dedup key %s)\n", v.MessageID, v.DedupKey)
	case api.RecoverAnswer:
		writeRecovery(tw, v)
	case rekeyed:
		fmt.Fprintf(tw, "resealed %d secrets under key %s\n", v.Resealed, v.Key)
	case api.PortalLink:
		fmt.Fprintf(tw, "%s\n(a credential until %s: give it to the customer only)\n", terminalText(v.URL), v.ExpiresAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// writeDestinationRows prints destinations as a table; wide adds the
// description, rate limit, times and payload filter. Every cell a tenant or the portal
// wrote (the description, a disable reason, the URL, the events) is
// escaped: they are outside text on an operator's terminal.
func writeDestinationRows(w io.Writer, wide bool, ds ...destinations.Destination) {
	header := "ID\tTENANT\tENABLED\tEVENTS\tURL"
	if wide {
		header += "\tRATE\tDESCRIPTION\tUPDATED\tFILTER"
	}
	fmt.Fprintln(w, header)
	for _, d := range ds {
		events := strings.Join(d.Events, ",")
		if events == "" {
			events = "**"
		}
		enabled := "yes"
		if !d.Enabled {
			enabled = "no: " + d.DisabledReason
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", terminalCell(d.ID), terminalCell(d.Tenant), terminalCell(enabled), terminalCell(events), terminalCell(d.URL))
		if wide {
			rate := "default"
			if d.RateLimit != nil {
				rate = fmt.Sprintf("%g/s", *d.RateLimit)
			}
			filter := "-"
			if len(d.Filter) > 0 {
				filter = terminalCell(string(d.Filter))
			}
			line += fmt.Sprintf("\t%s\t%s\t%s\t%s", rate, terminalCell(d.Description), d.UpdatedAt.Format(time.RFC3339), filter)
		}
		fmt.Fprintln(w, line)
	}
}
