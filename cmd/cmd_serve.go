package cmd

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/server"
)

func (a *app) serveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the relay and the HTTP API until SIGTERM or SIGINT, then drain",
		Long: `Runs the relay and the HTTP API (and the console) until SIGTERM or SIGINT,
then drains the deliveries in flight. It validates the whole configuration
first, as outboxd config check does, and refuses to start on any problem.

SIGHUP, or POST /-/reload with an admin token, reloads the configuration
file: validated the same way, a valid file replaces the sinks, routes and
relay settings without dropping deliveries in flight; an invalid one is
logged, problem by problem, and the running configuration stays. The
database, http and telemetry blocks need a restart.`,
		Example: `  outboxd serve --config /etc/outboxd/plugins.yaml
  OUTBOXD_HTTP_LISTEN=0.0.0.0:8080 OUTBOXD_HTTP_TOKEN=... outboxd serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context()) },
	}
}

func (a *app) serve(ctx context.Context) error {
	// From the start: SIGHUP's default is to end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	s, err := a.connect(ctx, config.Everything)
	if err != nil {
		return err
	}
	defer s.pool.Close()
	info, _ := build()
	return server.Run(ctx, server.Options{
		Config: s.cfg, Resources: &a.resources, Pool: s.pool, Env: a.io.Env, Build: info, Hangup: hup,
		Load:        func() (*config.Config, []string, error) { return a.load(config.Everything, "") },
		Logger:      a.logger,
		Scrubber:    func() secret.Scrubber { return a.scrub },
		DatabaseURL: a.resolveDatabaseURL,
	})
}
