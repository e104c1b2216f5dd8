package server

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/console"
)

// Keyring is the keyring of destinations.EnvSecretsKey, looked up with
// env; nil when it is not set.
func Keyring(env config.LookupEnv) (*destinations.Keyring, error) {
	keys, err := destinations.KeyringFromEnv(env)
	if errors.Is(err, destinations.ErrNoKeyring) {
		return nil, nil
	}
	if err != nil {
		return nil, &InputError{Err: err}
	}
	return keys, nil
}

// PortalLinks signs the tenant portal's links with keys derived from
// destinations.EnvSecretsKey, looked up with env; nil when it is not set
// (no portal).
func PortalLinks(env config.LookupEnv) (*console.PortalLinks, error) {
	keys, err := Keyring(env)
	if err != nil || keys == nil {
		return nil, err
	}
	return console.NewPortalLinks(keys)
}

// destinationStore is the Store of o.Config's schema, sealing with the
// keys of destinations.EnvSecretsKey when it is set.
func destinationStore(o Options) (*destinations.Store, error) {
	keys, err := Keyring(o.Env)
	if err != nil {
		return nil, err
	}
	return destinations.NewStore(o.Config.Database.Schema, keys)
}

// directoryUser is a sink that delivers to destinations (package
// sinks/destinations) and needs them loaded.
type directoryUser interface {
	UseDirectory(*destinations.Directory)
}

// followDestinations gives every destinations sink of o.Config the
// outbox's destinations; it returns the directory, to run once the
// database is up (a reloaded configuration's sinks get it too), or nil
// when no sink needs it.
func followDestinations(o Options, log *slog.Logger) (*destinations.Directory, error) {
	if !usesDirectory(o.Config) {
		return nil, nil
	}
	keys, err := destinations.KeyringFromEnv(o.Env)
	if err != nil {
		return nil, &InputError{Err: fmt.Errorf("a sink of type destinations is configured: %w", err)}
	}
	dir, err := destinations.NewDirectory(o.Pool, o.Config.Database.Schema, keys, log)
	if err != nil {
		return nil, err
	}
	useDirectory(o.Config, dir)
	return dir, nil
}

// usesDirectory reports whether a sink of cfg reads destinations.
func usesDirectory(cfg *config.Config) bool {
	for _, sc := range cfg.SinkConfigs() {
		if _, ok := sc.Sink.(directoryUser); ok {
			return true
		}
	}
	return false
}

// useDirectory gives every destinations sink of cfg the directory dir.
func useDirectory(cfg *config.Config, dir *destinations.Directory) {
	for _, sc := range cfg.SinkConfigs() {
		if u, ok := sc.Sink.(directoryUser); ok {
			u.UseDirectory(dir)
		}
	}
}
