package cmd_test

import (
	"github.com/outboxd/outboxd/cmd"
	"github.com/outboxd/outboxd/sinks/builtin/nobrokers"
)

// A custom build of outboxd: the built-in sink types without the broker
// clients, then the same command line as the stock binary's
// (examples/customsink adds a sink type of its own).
func Example_customBuild() {
	nobrokers.Register()
	cmd.Main()
}
