package server

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/portal"
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
func PortalLinks(env config.LookupEnv) (*portal.Links, error) {
	keys, err := Keyring(env)
	if err != nil || keys == nil {
		return nil, err
	}
	return portal.NewLinks(keys)
}

// destinationStore is ob's Store, sealing with the keys of
// destinations.EnvSecretsKey when it is set. Each generation's install
// gives it that configuration's quotas and network policy (followConfig).
func destinationStore(o Options, ob *outboxd.Outbox) (*destinations.Store, error) {
	keys, err := Keyring(o.Env)
	if err != nil {
		return nil, err
	}
	return ob.Destinations(keys), nil
}

// followConfig makes dests, which the API, the console and the portal
// share, enforce cfg's quotas and check URLs against its network policy:
// the policy the relay of cfg delivers under.
func followConfig(dests *destinations.Store, cfg *config.Config) {
	dests.Reconfigure(cfg.DestinationQuotas(), cfg.DestinationNetwork())
}

// followDestinations publishes the outbox's destinations to the sinks of
// o.Config, and of every configuration reloaded after it
// (destinations.DirectoryResource); it returns the directory, to run once the
// database is up, or nil when no sink's type uses it.
func followDestinations(o Options, ob *outboxd.Outbox, log *slog.Logger) (*destinations.Directory, error) {
	if !o.Config.UsesResource(destinations.DirectoryResource) {
		return nil, nil
	}
	keys, err := destinations.KeyringFromEnv(o.Env)
	if err != nil {
		return nil, &InputError{Err: fmt.Errorf("a sink of type destinations is configured: %w", err)}
	}
	dir, err := ob.Directory(keys, log)
	if err != nil {
		return nil, err
	}
	o.Resources.Publish(destinations.DirectoryResource, dir)
	return dir, nil
}
