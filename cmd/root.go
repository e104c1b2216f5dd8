// Package cmd is the outboxd command line: the cobra commands, built on
// package config (plugins.yaml), internal/httpapi (the HTTP API of serve)
// and internal/telemetry. It is importable so that a custom build of
// outboxd gets the same binary by calling [Main] once it has registered
// its sink types (the stock binary registers package sinks/builtin's):
//
//	func main() {
//		nobrokers.Register()
//		registry.Register("file", newFileSink)
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
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/internal/telemetry"
)

// Exit codes of the binary.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed (database down, ...)
	exitConfig  = 2 // bad configuration, flags or input: fix it and rerun
)

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

// badInputf is badInput(fmt.Errorf(format, args...)).
func badInputf(format string, args ...any) error { return badInput(fmt.Errorf(format, args...)) }

// exitCode maps an error to the binary's exit code.
func exitCode(err error) int {
	var ee *exitError
	var (
		ce *config.Error
		te *telemetry.InputError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ce), errors.As(err, &te):
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
	code := execute(ctx, os.Args[1:], streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Env: os.LookupEnv,
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
	databaseURL string
	logFormat   string
	logLevel    string
	ran         bool
	scrub       secret.Scrubber
	cfg         *config.Config
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "outboxd",
		Short: "Deliver messages from a PostgreSQL outbox to Slack, webhooks, email and your own sinks",
		Long: `outboxd relays messages that applications write to an outbox table in their
own PostgreSQL transactions to the sinks configured in plugins.yaml, with
retries, rate limits and dead letters. Several outboxd processes can share
one database.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionText(),
		PersistentPreRunE: func(*cobra.Command, []string) error {
			a.ran = true
			// Checked here, not when a command first logs: a wrong level
			// is refused by every command alike.
			_, err := telemetry.LogLevel(a.logLevel)
			return badInputIf(err)
		},
	}
	root.SetVersionTemplate("{{.Version}}")
	root.PersistentFlags().StringVar(&a.configPath, "config", "",
		fmt.Sprintf("configuration file (default $%s or ./%s)", config.FileEnv, config.DefaultFile))
	root.PersistentFlags().StringVar(&a.databaseURL, "database-url", "",
		"PostgreSQL URL (default $OUTBOX_DATABASE_URL, $DATABASE_URL, database.url, then libpq PG* variables).\n"+
			"A password in it is visible to other users of this machine (ps, /proc): set DATABASE_URL instead")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", telemetry.LogFormatAuto,
		"log format: auto (text on a terminal, JSON otherwise), text or json")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", telemetry.DefaultLogLevel,
		"least severe log records written: debug, info, warn or error")
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
		a.destinationsCommand(),
		a.configCommand(),
		a.versionCommand(),
	)
	return root
}

// logger returns the process's logger as --log-format and --log-level
// ask, scrubbed of the known secrets.
func (a *app) logger() (*slog.Logger, error) {
	log, err := telemetry.NewLogger(a.logFormat, a.logLevel, a.io.Err, isTerminal(a.io.Err), a.scrub)
	return log, badInputIf(err)
}

// config loads the configuration once and teaches the scrubber its
// secrets, also when the configuration has problems: their messages are
// scrubbed too.
func (a *app) config() (*config.Config, error) {
	if a.cfg != nil {
		return a.cfg, nil
	}
	cfg, secrets, err := config.Load(a.configPath, a.io.Env)
	configured := ""
	if cfg != nil {
		configured = cfg.Database.URL
	}
	secrets = append(secrets, secret.Values(map[string]any{"url": a.resolveDatabaseURL(configured)})...)
	a.scrub = secret.NewScrubber(secrets...)
	if err != nil {
		return nil, err
	}
	a.cfg = cfg
	return cfg, nil
}
