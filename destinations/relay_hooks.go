package destinations

import "github.com/outboxd/outboxd/core/relay"

// HookRelay sets, in sc, what the relay needs from a sink that delivers
// to destinations, when sc.Sink is one (a *Sink): each destination's own
// rate limit (relay.SinkConfig.KeyRateLimit) and how long its breaker
// may stay open before it is disabled (relay.SinkConfig.AutoDisableAfter).
// These are hooks of the engine, not part of the sink contract: whoever
// builds the relay's configuration of a destinations sink (the
// configuration's loader, or a program that builds one in Go) calls it.
// Other sinks' configurations are left alone.
func HookRelay(sc *relay.SinkConfig) {
	s, ok := sc.Sink.(*Sink)
	if !ok {
		return
	}
	sc.KeyRateLimit = s.KeyRateLimit
	sc.AutoDisableAfter = s.AutoDisableAfter()
}
