package sinks

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of PublishOptions.
const (
	// DefaultPublishTimeout bounds one publish's wait for the broker's
	// acknowledgement (a JetStream ack, a publisher confirm, the ack of all
	// in-sync replicas). The relay's delivery deadline bounds it too.
	DefaultPublishTimeout = 10 * time.Second
	// DefaultConnectTimeout bounds dialing the broker.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultMaxInFlight bounds the publishes of one sink instance that
	// wait for their acknowledgement at once; more deliveries wait for a
	// place.
	DefaultMaxInFlight = 256
)

// PublishOptions are the options every broker sink has, declared once
// here. A broker sink's Options embed them with `mapstructure:",squash"`,
// so that in plugins.yaml they sit beside its own options.
type PublishOptions struct {
	Timeout        time.Duration `mapstructure:"timeout" doc:"bounds one publish's wait for the broker's acknowledgement; the relay's delivery deadline bounds it too"`
	ConnectTimeout time.Duration `mapstructure:"connect_timeout" doc:"bounds dialing the broker"`
	MaxInFlight    int           `mapstructure:"max_in_flight" doc:"publishes of this sink awaiting their acknowledgement at once; more deliveries wait for a place"`
}

// DefaultPublishOptions returns the PublishOptions of a broker sink before
// its options block applies.
func DefaultPublishOptions() PublishOptions {
	return PublishOptions{Timeout: DefaultPublishTimeout, ConnectTimeout: DefaultConnectTimeout, MaxInFlight: DefaultMaxInFlight}
}

// Check refuses a timeout or bound that is not positive, naming the option.
func (o PublishOptions) Check() error {
	return errors.Join(
		positive("timeout", o.Timeout),
		positive("connect_timeout", o.ConnectTimeout),
		positive("max_in_flight", o.MaxInFlight),
	)
}

func positive[T int | time.Duration](name string, value T) error {
	if value <= 0 {
		return fmt.Errorf("option %s: must be positive, got %v", name, value)
	}
	return nil
}
