package secret_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/outboxd/outboxd/internal/secret"
)

func TestRedactorHidesSecretsAndKeepsTheChain(t *testing.T) {
	t.Parallel()
	r := secret.NewScrubber("p@ss/word", "", "token123")
	err := r.Error(fmt.Errorf("dial amqp://u:p%%40ss%%2Fword@h and token123: %w", io.EOF))
	if got, want := err.Error(), "dial amqp://u:[REDACTED]@h and [REDACTED]: EOF"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !errors.Is(err, io.EOF) {
		t.Error("the redacted error lost its chain")
	}
	clean := errors.New("nothing secret")
	if r.Error(clean) != clean {
		t.Error("an error without secrets was replaced")
	}
	if r.Error(nil) != nil {
		t.Error("nil became an error")
	}
}
