package cmd

import (
	"testing"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/destinations"
)

// The variable the destinations' keys are read from is one the
// configuration knows, so that setting it warns of no unknown OUTBOXD_
// variable (it did: "did you mean OUTBOXD_HTTP_TOKEN?").
// Mutation: renaming either constant makes this fail.
func TestSecretsKeyVariableIsKnownToConfig(t *testing.T) {
	t.Parallel()
	if destinations.EnvSecretsKey != config.SecretsKeyEnv {
		t.Errorf("destinations reads %s, the configuration knows %s", destinations.EnvSecretsKey, config.SecretsKeyEnv)
	}
}
