package cmd

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// The rule every destructive command follows (dlq redrive and purge,
// destinations delete; docs/operations.md, "Destructive commands"): it
// counts first; --dry-run only counts; on a terminal it asks before acting
// on what it counted, unless --yes; without a terminal nothing can ask,
// so it refuses (exit 2) unless --yes or --dry-run: a script that left
// out --yes by mistake must not delete in bulk unasked.

// destructive holds the flags of a destructive command.
type destructive struct {
	yes, dryRun bool
}

// add declares --dry-run and --yes on c; done says what the command does
// to what it counts ("purged", "deleted").
func (d *destructive) add(c *cobra.Command, done string) {
	c.Flags().BoolVar(&d.dryRun, "dry-run", false, "only count what would be "+done)
	c.Flags().BoolVar(&d.yes, "yes", false, "act without asking (needed when not on a terminal, e.g. in a script)")
}

// check refuses, before anything connects, a command that would have to
// ask with no terminal to ask on.
func (d *destructive) check(a *app, name string) error {
	if d.yes || d.dryRun || a.io.Terminal {
		return nil
	}
	return badInputf("%s: refusing to act without asking, and there is no terminal to ask on: pass --yes to act, or --dry-run to count only", name)
}

// asks reports whether the command counts and asks before acting: on a
// terminal (check refused the rest), unless --yes or --dry-run.
func (d *destructive) asks() bool { return !d.yes && !d.dryRun }

// approve asks question on the terminal and returns nil for yes, or the
// error (exit 1) of an answer that was not yes: nothing changed.
func (a *app) approve(name, question string) error {
	fmt.Fprint(a.io.Err, question+" [y/N] ")
	answer, _ := bufio.NewReader(a.io.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("%s: not confirmed; nothing changed", name)}
}
