// Package cmd is the outboxd command line: the cobra commands only (their
// flags, arguments, output and exit codes). `outboxd serve` hands over to
// the server room (package server), the other commands call the engine.
//
// [Main] is the whole of main() in the stock binary, and in a custom
// build: register the sink types the build links (package sinks/builtin's,
// or nobrokers' without the broker clients, and your own through package
// registry), then call Main. examples/customsink is such a build:
//
//	func main() {
//		nobrokers.Register()
//		// register your own sink types here (package registry)
//		cmd.Main()
//	}
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/server"
	"github.com/outboxd/outboxd/server/telemetry"
)

// Exit codes of the binary, the same for every command; exitCodes says
// what each means, for the root command's help.
const (
	exitOK      = 0
	exitFailure = 1
	exitConfig  = 2
)

// exitCodes are the binary's exit codes and what each means: the one list
// the root command's help prints.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "done"},
	{exitFailure, "not found (a message, a dead letter, a destination), or the command ran and failed (database down, a sink's check)"},
	{exitConfig, "usage or configuration: a wrong flag, argument or input, a configuration with problems, or none found; fix it and rerun"},
}

// exitCodesHelp is the exit codes' section of the root command's help.
func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes, the same for every command:")
	for _, c := range exitCodes {
		fmt.Fprintf(&b, "\n  %d  %s", c.code, c.meaning)
	}
	return b.String()
}

// exitError carries an exit code with an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as the user's to fix (exit code exitConfig).
func badInput(err error) error { return &exitError{code: exitConfig, err: err} }

// badInputIf is badInput(err), or nil when err is nil.
func badInputIf(err error) error {
	if err == nil {
		return nil
	}
	return badInput(err)
}

// notFound marks err as saying that what the command names does not exist
// (exit code exitFailure).
func notFound(err error) error { return &exitError{code: exitFailure, err: err} }

// badInputf is badInput(fmt.Errorf(format, args...)).
func badInputf(format string, args ...any) error { return badInput(fmt.Errorf(format, args...)) }

// exitCode maps an error to the binary's exit code.
func exitCode(err error) int {
	var ee *exitError
	var (
		ce *config.Error
		te *telemetry.InputError
		se *server.InputError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ce), errors.As(err, &te), errors.As(err, &se):
		return exitConfig
	}
	return exitFailure
}

// streams are where a command reads and writes: the process's standard streams
// in the binary, buffers in tests.
type streams struct {
	In       io.Reader
	Out, Err io.Writer
	// Env looks up environment variables.
	Env config.LookupEnv
	// Environ lists them (NAME=value), for the warning about OUTBOXD_
	// variables that override nothing; nil in tests that need none.
	Environ []string
	// Terminal says a person is at In and Err: commands that delete or
	// move rows in bulk ask them first (unless --yes).
	Terminal bool
}

// Main runs the outboxd command line with the process's arguments and
// environment, cancels on SIGINT or SIGTERM, and exits with the command's
// exit code. It is the whole of main() in the outboxd binary and in custom
// builds.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Env: os.LookupEnv, Environ: os.Environ(),
		Terminal: term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stderr.Fd()))})
	stop()
	os.Exit(code)
}

// execute runs the command line given by args and returns its exit code.
// Errors are printed to io.Err with known secrets scrubbed.
func execute(ctx context.Context, args []string, io streams) int {
	a := &app{io: io, scrub: secret.NewScrubber()}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	err := root.ExecuteContext(ctx)
	if err != nil {
		if !a.ran {
			// Cobra's own errors: unknown command, flag or argument.
			err = badInput(err)
		}
		fmt.Fprintln(io.Err, "Error:", terminalText(a.scrub.String(err.Error())))
	}
	return exitCode(err)
}

// app holds what the commands share: global flags, the streams, and the
// configuration once loaded.
type app struct {
	io          streams
	configPath  string
	configGiven bool // --config was given, maybe as ""
	databaseURL string
	logFormat   string
	logLevel    string
	ran         bool
	scrub       secret.Scrubber
	secrets     []string // what scrub hides
	cfg         *config.Config
	warned      map[string]bool

	// resources are what the process shares with the sinks of every
	// configuration it loads; serve publishes the destinations there.
	resources registry.Resources
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "outboxd",
		Short: "Deliver messages from a PostgreSQL outbox to Slack, webhooks, email and your own sinks",
		Long: `outboxd relays messages that applications write to an outbox table in their
own PostgreSQL transactions to the sinks configured in plugins.yaml, with
retries, rate limits and dead letters. Several outboxd processes can share
one database.

` + exitCodesHelp(),
		Example: `  outboxd config check               # validate plugins.yaml as serve would
  outboxd migrate && outboxd serve     # create the schema, then relay
  DATABASE_URL=postgres://outboxd@db/app outboxd stats`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionText(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.ran = true
			a.configGiven = cmd.Flags().Changed("config")
			// Checked here, not when a command first logs: a wrong level
			// is refused by every command alike.
			_, err := telemetry.LogLevel(a.logLevel)
			return badInputIf(err)
		},
	}
	root.SetVersionTemplate("{{.Version}}")
	root.PersistentFlags().StringVar(&a.configPath, "config", "",
		fmt.Sprintf("configuration `file` (default $%s or ./%s; '' for the built-in defaults)", config.FileEnv, config.DefaultFile))
	root.PersistentFlags().StringVar(&a.databaseURL, "database-url", "",
		"PostgreSQL `URL` (default $OUTBOXD_DATABASE_URL, $DATABASE_URL, database.url, then libpq PG* variables).\n"+
			"A password in it is visible to other users of this machine (ps, /proc): set DATABASE_URL instead")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", telemetry.LogFormatAuto,
		"log `format`: auto (text on a terminal, JSON otherwise), text or json")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", telemetry.DefaultLogLevel,
		"least severe log records written, a `level`: debug, info, warn or error")
	root.AddCommand(
		a.migrateCommand(),
		a.serveCommand(),
		a.enqueueCommand(),
		a.publishCommand(),
		a.routesCommand(),
		a.statsCommand(),
		a.dlqCommand(),
		a.getCommand(),
		a.messagesCommand(),
		a.sinksCommand(),
		a.auditCommand(),
		a.destinationsCommand(),
		a.configCommand(),
		a.versionCommand(),
	)
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil {
		c.Example = `  # bash, for this shell; add it to ~/.bashrc to keep it
  source <(outboxd completion bash)

  # zsh and fish
  outboxd completion zsh > "${fpath[1]}/_outboxd"
  outboxd completion fish > ~/.config/fish/completions/outboxd.fish`
	}
	finishCommands(root)
	return root
}

// suggestionDistance is the largest edit distance at which an unknown
// command gets a suggestion (cobra's own default for the root).
const suggestionDistance = 2

// finishCommands applies the conventions every command follows, below
// root: a command that only groups others refuses an unknown one (exit 2,
// with the nearest name) instead of printing its help and exiting 0, and
// no flag's help shows an empty list as its default.
func finishCommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		finishCommands(sub)
	}
	c.Flags().VisitAll(func(f *pflag.Flag) {
		// pflag itself hides an empty string list's "[]" (and would show a
		// blanked one as "(default )"), but not other lists' (int64Slice).
		if f.DefValue == "[]" && !hidesEmptyDefault[f.Value.Type()] {
			f.DefValue = ""
		}
	})
	c.SuggestionsMinimumDistance = suggestionDistance
	if c.HasParent() && c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = unknownSubcommand
	}
}

// hidesEmptyDefault are the flag types whose empty default pflag leaves
// out of the help by itself.
var hidesEmptyDefault = map[string]bool{"stringSlice": true, "stringArray": true}

// unknownSubcommand is the body of a command that only groups others: run
// bare it prints its help; with an argument, that is an unknown command.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return c.Help()
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
	if near := c.SuggestionsFor(args[0]); len(near) > 0 {
		err = fmt.Errorf("%w; did you mean %q?", err, near[0])
	}
	return badInput(err)
}

// logger returns the process's logger as --log-format and --log-level
// ask, scrubbed of the known secrets.
func (a *app) logger() (*slog.Logger, error) {
	log, err := telemetry.NewLogger(a.logFormat, a.logLevel, a.io.Err, isTerminal(a.io.Err), a.scrub)
	return log, badInputIf(err)
}

// config loads the configuration (once: a command loads it in one scope)
// and teaches the scrubber its secrets, also when the configuration has
// problems: their messages are scrubbed too. Its warnings go to stderr.
//
// Commands that need only the database (stats, dlq, get, messages, sinks,
// audit, migrate, routes apply) load it as config.DatabaseOnly, usually
// through withDB; serve, config check, enqueue and publish as
// config.Everything.
func (a *app) config(scope config.Scope) (*config.Config, error) {
	return a.configWith(scope, "")
}

// configWith is config, with the options of one sink loaded and that sink
// built under config.DatabaseOnly (config.Source.Sink).
func (a *app) configWith(scope config.Scope, sink string) (*config.Config, error) {
	if a.cfg != nil {
		return a.cfg, nil
	}
	cfg, warnings, err := a.load(scope, sink)
	if err == nil && scope != config.Everything && cfg.File == "" {
		// No file was found, or --config '' asked for the built-in
		// defaults. config.Load takes a missing default file for the
		// defaults under DatabaseOnly, but an operator command run so
		// would call every sink unconfigured, and migrate would migrate
		// the default schema: every command refuses it as serve and
		// enqueue do. Everything's load of the same source is that
		// refusal, naming where it looked and --config '', and passes
		// the defaults asked for.
		_, _, err = a.load(config.Everything, sink)
	}
	for _, w := range warnings {
		a.warn(w)
	}
	if err != nil {
		return nil, err
	}
	a.cfg = cfg
	return a.cfg, nil
}

// load reads the configuration afresh (config.Load) and adds its secrets
// to the scrubber's, also when it has problems: their messages are
// scrubbed too. The scrubber keeps the secrets it knew, which a
// configuration serve reloads away may still be in use by the relay
// draining it. It returns the loader's warnings for the caller to show.
func (a *app) load(scope config.Scope, sink string) (*config.Config, []string, error) {
	loaded, err := config.Load(config.Source{Path: a.configPath, PathGiven: a.configGiven, Env: a.io.Env, Environ: a.io.Environ, Sink: sink,
		Variables: map[string]string{destinations.EnvSecretsKey: "the keys sealing destinations' signing secrets"},
		Resources: &a.resources}, scope)
	configured := ""
	if loaded.Config != nil {
		configured = loaded.Config.Database.URL
	}
	a.secrets = append(a.secrets, loaded.Secrets...)
	a.secrets = append(a.secrets, secret.Values(map[string]any{"url": a.resolveDatabaseURL(configured)})...)
	slices.Sort(a.secrets) // a reload adds the same ones again
	a.secrets = slices.Compact(a.secrets)
	a.scrub = secret.NewScrubber(a.secrets...)
	return loaded.Config, loaded.Warnings, err
}

// warn prints a warning on stderr, each one once.
func (a *app) warn(text string) {
	if a.warned[text] {
		return
	}
	if a.warned == nil {
		a.warned = map[string]bool{}
	}
	a.warned[text] = true
	fmt.Fprintln(a.io.Err, "Warning:", terminalText(a.scrub.String(text)))
}
