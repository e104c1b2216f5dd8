package cmd

import "github.com/outboxd/outboxd/sinks/builtin"

// The commands run here as in the stock binary, with its sink types.
func init() { builtin.Register() }
