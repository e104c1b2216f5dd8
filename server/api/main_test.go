package api

import "github.com/outboxd/outboxd/sinks/builtin"

// The API is tested with the stock binary's sink types.
func init() { builtin.Register() }
