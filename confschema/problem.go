package confschema

import "fmt"

// Problem is one thing wrong with a configuration, named by its key: a key
// that is not declared, or a value the key cannot take.
type Problem struct {
	// Key is the full key path: relay.batch_size, sinks.hook.options.timeout,
	// routes[2].match.
	Key string
	// Unknown marks a key that is not declared; Suggestion then holds the
	// nearest declared key when one is close.
	Unknown    bool
	Suggestion string
	// Message says what is wrong with the value (empty for Unknown).
	Message string
}

// String is the problem as a user reads it.
func (p Problem) String() string {
	if !p.Unknown {
		return p.Key + ": " + p.Message
	}
	if p.Suggestion == "" {
		return "unknown key " + p.Key
	}
	return fmt.Sprintf("unknown key %s (did you mean %s?)", p.Key, p.Suggestion)
}

// Under returns p with its key (and suggestion) below prefix, for problems
// found in a part of a larger configuration (a sink's options).
func (p Problem) Under(prefix string) Problem {
	p.Key = Join(prefix, p.Key)
	if p.Suggestion != "" {
		p.Suggestion = Join(prefix, p.Suggestion)
	}
	return p
}
