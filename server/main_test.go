package server

import "github.com/outboxd/outboxd/sinks/builtin"

// The daemon runs here as in the stock binary, with its sink types.
func init() { builtin.Register() }
