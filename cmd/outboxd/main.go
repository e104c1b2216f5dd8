// Command outboxd delivers messages from a PostgreSQL outbox to the sinks
// configured in plugins.yaml. See `outboxd --help`.
package main

import (
	"github.com/outboxd/outboxd/cmd"
	"github.com/outboxd/outboxd/sinks/builtin"
)

func main() {
	builtin.Register()
	cmd.Main()
}
