package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/server/api"
)

func (a *app) getCommand() *cobra.Command {
	var (
		sink, key string
		o         output
	)
	c := &cobra.Command{
		Use:   "get (ID | --sink S --key K) [-o table|json]",
		Short: "Show one message: payload, headers, status, every failed attempt, receipt and trace id",
		Long: `Shows one message by its id, or by its sink and dedup key: payload, headers,
status, every failed attempt, the receipt and the trace id. It needs only
the database: the sinks' options and their secrets are not read. -o wide
is the same as the table.`,
		Example: `  outboxd get 4711
  outboxd get --sink ops-slack --key order-42 -o json`,
		Args: cobra.MaximumNArgs(1),
		PreRunE: checkOutput(&o, func(_ *cobra.Command, args []string) error {
			byKey := sink != "" || key != ""
			switch {
			case len(args) == 1 && byKey:
				return badInputf("get: give an id or --sink and --key, not both")
			case len(args) == 0 && (sink == "" || key == ""):
				return badInputf("get: give a message id, or --sink and --key")
			}
			return nil
		}),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			var (
				m   operator.StoredMessage
				err error
			)
			if args := cmd.Flags().Args(); len(args) == 1 {
				id, perr := strconv.ParseInt(args[0], 10, 64)
				if perr != nil || id <= 0 {
					return badInputf("get: %q is not a message id", args[0])
				}
				m, err = s.ops.Message(cmd.Context(), s.pool, id)
			} else {
				m, err = s.ops.MessageByKey(cmd.Context(), s.pool, sink, key)
			}
			if errors.Is(err, operator.ErrMessageNotFound) {
				return &exitError{code: exitFailure, err: errors.New("no such message")}
			}
			if err != nil {
				return err
			}
			if o.json() {
				return writeJSON(cmd.OutOrStdout(), api.NewMessageReport(m))
			}
			return writeMessage(cmd.OutOrStdout(), m)
		}),
	}
	c.Flags().StringVar(&sink, "sink", "", "the message's `sink` (with --key)")
	c.Flags().StringVar(&key, "key", "", "the message's dedup `key` (with --sink)")
	_ = c.RegisterFlagCompletionFunc("sink", a.completeSinks)
	addOutputFlags(c, &o, "one object, as GET /v1/messages/ID")
	return c
}

// writeMessage prints a message for a person: one field a line, then the
// payload indented and every failed attempt. Stored text is shown with
// what a terminal would obey escaped.
func writeMessage(w io.Writer, m operator.StoredMessage) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(name, value string) { fmt.Fprintf(tw, "%s\t%s\n", name, terminalCell(value)) }
	line("id", strconv.FormatInt(m.ID, 10))
	line("sink", m.Sink)
	line("dedup key", m.DedupKey)
	line("status", string(m.Status))
	attempts := strconv.Itoa(m.Attempts)
	if m.MaxAttempts != nil {
		attempts += fmt.Sprintf(" of %d", *m.MaxAttempts)
	}
	line("attempts", attempts)
	if m.OrderingKey != "" {
		line("ordering key", m.OrderingKey)
	}
	line("created", timeText(&m.CreatedAt))
	line("available", timeText(&m.AvailableAt))
	line("updated", timeText(&m.UpdatedAt))
	line("sent", timeText(m.SentAt))
	if id := m.TraceID(); id != "" {
		line("trace id", id)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
		line("header "+k, m.Headers[k])
	}
	if len(m.Receipt) > 0 {
		line("receipt", string(m.Receipt))
	}
	if m.LastError != "" {
		line("last error", m.LastError)
	}
	if a := m.LastAttempt; a != nil {
		line("last attempt", attemptText(a))
		if a.Response != "" {
			line("last answer", a.Response)
		}
	}
	if d := m.Digest; d != nil {
		line("digest", fmt.Sprintf("%d (%s, key %s, %d other members)", d.ID, d.DeliveryID, d.Key, len(d.Siblings)))
		line("siblings", idList(d.Siblings))
	}
	if f := m.Fallback; f != nil && f.To != "" {
		line("fell back", fmt.Sprintf("to sink %s, message %d: %s", f.To, f.ID, f.Reason))
	}
	if f := m.Fallback; f != nil && f.From != "" {
		line("fallback of", fmt.Sprintf("message %d of sink %s: %s", f.Of, f.From, f.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "payload:")
	fmt.Fprintln(w, indent(terminalText(prettyJSON(m.Payload)), "  "))
	if len(m.FailedAttempts) > 0 {
		fmt.Fprintln(w, "failed attempts:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, e := range m.FailedAttempts {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", e.Attempt, e.FailedAt.UTC().Format(time.RFC3339), terminalCell(e.Error), attemptText(e.Details))
		}
		return tw.Flush()
	}
	return nil
}

// idList is ids separated by spaces.
func idList(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, " ")
}

// prettyJSON indents a stored JSON value; anything it cannot parse is
// returned as it is.
func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// timeText is t in UTC, RFC 3339, or "-" for none.
func timeText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func (a *app) messagesCommand() *cobra.Command {
	c := &cobra.Command{
		Use:     "messages",
		Short:   "Search messages",
		Example: `  outboxd messages list --sink ops-slack --status dead`,
	}
	c.AddCommand(a.messagesListCommand())
	return c
}

func (a *app) messagesListCommand() *cobra.Command {
	var (
		f            operator.MessageFilter
		statusFlag   string
		since, until string
		o            output
	)
	c := &cobra.Command{
		Use:   "list [--sink S] [--status S] [--key K] [--since T] [--until T] [--before ID] [--limit N] [-o table|wide|json]",
		Short: "List messages newest first, a page at a time (--before continues below an id)",
		Long: `Lists messages newest first, a page at a time: after a full page it prints
the --before that continues below it. It needs only the database: the
sinks' options and their secrets are not read. -o wide adds when each
message was last updated and sent.`,
		Example: `  outboxd messages list --sink ops-slack --status failed
  outboxd messages list --since 2h -o json | jq '.messages[].id'`,
		Args: cobra.NoArgs,
		PreRunE: checkOutput(&o, func(*cobra.Command, []string) error {
			f.Status = status.Row(statusFlag)
			if err := api.CheckStatus(f.Status); err != nil {
				return badInput(err)
			}
			now := time.Now()
			for flag, p := range map[string]struct {
				v   string
				dst *time.Time
			}{"--since": {since, &f.CreatedFrom}, "--until": {until, &f.CreatedBefore}} {
				t, err := parseWhen(p.v, now)
				if err != nil {
					return badInputf("%s: %w", flag, err)
				}
				*p.dst = t
			}
			if f.Limit < 0 || f.Before < 0 {
				return badInputf("--limit and --before must not be negative")
			}
			return nil
		}),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			a.warnUnknownSink(s, f.Sink)
			page, err := s.ops.Messages(cmd.Context(), s.pool, f)
			if err != nil {
				return err
			}
			if o.json() {
				return writeJSON(cmd.OutOrStdout(), page)
			}
			if err := writeMessageTable(cmd.OutOrStdout(), page.Messages, o.wide()); err != nil {
				return err
			}
			if page.Next != 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: run again with --before %d\n", page.Next)
			}
			return nil
		}),
	}
	c.Flags().StringVar(&f.Sink, "sink", "", "only this `sink`'s messages")
	c.Flags().StringVar(&statusFlag, "status", "", "only messages in this `status`: pending, in_progress, failed, sent or dead")
	c.Flags().StringVar(&f.DedupKey, "key", "", "only messages with this dedup `key`")
	c.Flags().StringVar(&since, "since", "", "only messages created at or after this `time` (RFC 3339, or a duration ago such as 2h)")
	c.Flags().StringVar(&until, "until", "", "only messages created before this `time` (RFC 3339, or a duration ago)")
	c.Flags().Int64Var(&f.Before, "before", 0, "only messages with a smaller `id` (the cursor printed after a full page)")
	c.Flags().IntVar(&f.Limit, "limit", operator.DefaultMessageLimit, fmt.Sprintf("at most this `many` (up to %d)", operator.MaxMessageLimit))
	_ = c.RegisterFlagCompletionFunc("sink", a.completeSinks)
	_ = c.RegisterFlagCompletionFunc("status", completeStatuses)
	addOutputFlags(c, &o, `one object: {"messages": [...], "next_before": N}`)
	return c
}

// parseWhen reads an RFC 3339 time, or a duration meaning that long
// before now; "" is the zero time (no bound).
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (2h), got %q", s)
	}
	return t, nil
}

func writeMessageTable(w io.Writer, messages []operator.MessageSummary, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	more := ""
	if wide {
		more = "UPDATED_AT\tSENT_AT\t"
	}
	fmt.Fprintln(tw, "ID\tSINK\tDEDUP_KEY\tSTATUS\tATTEMPTS\tCREATED_AT\t"+more+"LAST_ERROR")
	for _, m := range messages {
		if wide {
			more = timeText(&m.UpdatedAt) + "\t" + timeText(m.SentAt) + "\t"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s%s\n", m.ID, terminalCell(m.Sink), terminalCell(m.DedupKey), m.Status,
			m.Attempts, m.CreatedAt.UTC().Format(time.RFC3339), more, terminalCell(m.LastError))
	}
	return tw.Flush()
}
