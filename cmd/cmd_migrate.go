package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/migrate"
)

// shortChecksum is how many hex digits of a checksum the status table
// shows (-o wide shows them all).
const shortChecksum = 12

func (a *app) migrateCommand() *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:   "migrate [--dry-run]",
		Short: "Create or upgrade the outbox schema and apply the configuration's routes; safe to run from several pods at once",
		Long: `Creates the outbox schema if needed, applies the migrations it has not
recorded yet in one transaction (concurrent runs queue on a lock), and
applies the configuration's routes when it has some. It needs only the
database: the sinks' options and their secrets are not read. It first
prints the host, database and schema it works on; with no database named
anywhere (--database-url, $OUTBOXD_DATABASE_URL, $DATABASE_URL,
database.url, the libpq PG* variables) it refuses to run.

--dry-run changes nothing and lists what would be applied; outboxd migrate
sql prints the SQL itself, and outboxd migrate status what is applied.`,
		Example: `  # Upgrade the schema named in plugins.yaml, in the database of $DATABASE_URL
  DATABASE_URL=postgres://outboxd@db/app outboxd migrate

  # See what an upgrade would do first
  outboxd migrate --dry-run`,
		Args: cobra.NoArgs,
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			out := cmd.OutOrStdout()
			if dryRun {
				fmt.Fprintf(out, "dry run on %s: nothing is changed\n", s.target)
				return dryRunMigrate(cmd.Context(), out, s)
			}
			fmt.Fprintf(out, "migrating %s\n", s.target)
			applied, err := s.mig.MigrateAs(cmd.Context(), s.pool, a.actor())
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintf(out, "schema %s is up to date\n", s.mig.Schema())
			} else {
				fmt.Fprintf(out, "schema %s: applied migrations %v\n", s.mig.Schema(), applied)
			}
			if !s.cfg.HasRoutes() {
				return nil
			}
			return applyRoutes(cmd.Context(), out, s, a.actor())
		}),
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "change nothing: list the migrations and routes that would be applied")
	c.AddCommand(a.migrateStatusCommand(), a.migrateSQLCommand())
	return c
}

// dryRunMigrate lists what migrate would apply: the pending migrations and
// whether the routes would change.
func dryRunMigrate(ctx context.Context, out io.Writer, s session) error {
	script, err := s.mig.PendingScript(ctx, s.pool)
	if err != nil {
		return err
	}
	if len(script.Migrations) == 0 {
		fmt.Fprintf(out, "schema %s is up to date: no migration would be applied\n", s.mig.Schema())
	}
	for _, mg := range script.Migrations {
		fmt.Fprintf(out, "would apply migration %03d_%s (sha256 %s)\n", mg.Version, mg.Name, mg.Checksum)
	}
	if !s.cfg.HasRoutes() {
		return nil
	}
	if len(script.Migrations) > 0 {
		fmt.Fprintf(out, "would apply the configuration's routes (%d) after the migrations\n", len(s.cfg.RouteTable().Routes()))
		return nil
	}
	version, digest, err := s.ob.Routes().Active(ctx, s.pool)
	switch {
	case err != nil:
		return err
	case digest == s.cfg.RouteTable().Digest():
		fmt.Fprintf(out, "routes unchanged: version %d is active\n", version)
	default:
		fmt.Fprintf(out, "would apply the configuration's routes (%d) as a new version\n", len(s.cfg.RouteTable().Routes()))
	}
	return nil
}

// migrationStatus is `migrate status -o json`.
type migrationStatus struct {
	Target     dbTarget            `json:"target"`
	Pending    int                 `json:"pending"`
	Migrations []migrate.Migration `json:"migrations"`
}

func (a *app) migrateStatusCommand() *cobra.Command {
	var o output
	c := &cobra.Command{
		Use:   "status [-o table|wide|json]",
		Short: "List the migrations: applied (when, with which checksum) and pending",
		Long: `Lists every migration of this binary and of the schema's ledger, in order:
applied, with when and the sha256 it was applied with, or pending. A
migration whose recorded checksum is not this binary's is marked changed;
one the ledger has but this binary does not, unknown (a newer outboxd
migrated the schema). It exits 0 whether or not migrations are pending.`,
		Example: `  outboxd migrate status
  outboxd migrate status -o json | jq '.pending'`,
		Args:    cobra.NoArgs,
		PreRunE: checkOutput(&o, nil),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			list, err := s.mig.Status(cmd.Context(), s.pool)
			if err != nil {
				return err
			}
			st := migrationStatus{Target: s.target, Migrations: list}
			for _, m := range list {
				if !m.Applied {
					st.Pending++
				}
			}
			if o.json() {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			return writeMigrationStatus(cmd.OutOrStdout(), st, o.wide())
		}),
	}
	addOutputFlags(c, &o, `{"target", "pending", "migrations": [...]}`)
	return c
}

func writeMigrationStatus(w io.Writer, st migrationStatus, wide bool) error {
	fmt.Fprintf(w, "%s: %d pending\n", st.Target, st.Pending)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "VERSION\tNAME\tSTATUS\tAPPLIED_AT\tCHECKSUM"
	if wide {
		header += "\tAPPLIED_CHECKSUM"
	}
	fmt.Fprintln(tw, header)
	for _, m := range st.Migrations {
		status, at := "pending", "-"
		switch {
		case m.Unknown:
			status = "unknown to this binary"
		case m.Changed:
			status = "applied, changed since"
		case m.Applied:
			status = "applied"
		}
		if m.AppliedAt != nil {
			at = timeText(m.AppliedAt)
		}
		sum, recorded := m.Checksum, m.AppliedChecksum
		if !wide {
			sum = shorten(sum, shortChecksum)
		}
		line := fmt.Sprintf("%03d\t%s\t%s\t%s\t%s", m.Version, terminalCell(m.Name), status, at, orDash(sum))
		if wide {
			line += "\t" + orDash(recorded)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func (a *app) migrateSQLCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "sql",
		Short: "Print the SQL outboxd migrate would run now, for review; runs none of it",
		Long: `Prints the statements outboxd migrate would run on the schema now: creating
the schema and its ledger if needed, then each pending migration, in one
transaction. Nothing is run. (migrate also records each migration in the
ledger and takes an advisory lock, which are left out.)`,
		Example: `  outboxd migrate sql > upgrade.sql
  outboxd migrate sql --database-url postgres://reviewer@staging/app`,
		Args: cobra.NoArgs,
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			script, err := s.mig.PendingScript(cmd.Context(), s.pool)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "-- outboxd migrate on %s\n", s.target)
			if len(script.Migrations) == 0 {
				fmt.Fprintf(out, "-- schema %s is up to date: migrate would run no migration\n", s.mig.Schema())
				return nil
			}
			fmt.Fprintf(out, "BEGIN;\n\n%s\n", script.Prepare)
			for _, mg := range script.Migrations {
				fmt.Fprintf(out, "\n-- migration %03d_%s (sha256 %s)\n%s\n", mg.Version, mg.Name, mg.Checksum, strings.TrimSpace(mg.SQL))
			}
			fmt.Fprintln(out, "\nCOMMIT;")
			return nil
		}),
	}
}

// shorten cuts s to n bytes (checksums are hex).
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
