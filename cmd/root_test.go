package cmd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/server/telemetry"
)

// A configuration's problems, and unusable telemetry settings, are the
// user's to fix: exit code 2.
func TestConfigurationErrorsExitWithTheConfigurationCode(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&config.Error{Problems: []string{"x"}},
		fmt.Errorf("serve: %w", &telemetry.InputError{Err: errors.New("bad protocol")}),
	} {
		if got := exitCode(err); got != exitConfig {
			t.Errorf("exit code of %v: %d, want %d", err, got, exitConfig)
		}
	}
}
