package cmd

import "runtime/debug"

// Version is the outboxd version `outboxd --version` prints. Release and
// image builds set it with -ldflags "-X github.com/outboxd/outboxd/cmd.Version=v1.2.3";
// otherwise it is the module version Go recorded, "(devel)" for a build from
// a checkout.
var Version = ""

// version returns Version, or what the Go toolchain recorded.
func version() string {
	if Version != "" {
		return Version
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Version
	}
	return "unknown"
}
