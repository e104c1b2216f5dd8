package cmd

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Version is the version `outboxd version` and `outboxd --version` print.
// Release and image builds set it with -ldflags "-X
// github.com/outboxd/outboxd/cmd.Version=v1.2.3"; otherwise it is the
// module version Go recorded, "(devel)" for a build from a checkout.
var Version = ""

// unknownBuildInfo stands for what a binary built without module or VCS
// information cannot tell.
const unknownBuildInfo = "unknown"

// versionText is what `outboxd version` and `outboxd --version` print: the
// version (Version, else the module version), the VCS revision (with its
// time, and "modified" for a build from a dirty tree) and the Go version,
// from the binary's build information. A revision needs a build from a git
// checkout with VCS stamping on (go build -buildvcs=auto or true; `make
// build` asks for it).
func versionText() string {
	version, revision, goVersion := Version, unknownBuildInfo, unknownBuildInfo
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" {
			version = bi.Main.Version
		}
		goVersion = bi.GoVersion
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if r := settings["vcs.revision"]; r != "" {
			revision = r
			var notes []string
			if t := settings["vcs.time"]; t != "" {
				notes = append(notes, t)
			}
			if settings["vcs.modified"] == "true" {
				notes = append(notes, "modified")
			}
			if len(notes) > 0 {
				revision += " (" + strings.Join(notes, ", ") + ")"
			}
		}
	}
	if version == "" {
		version = unknownBuildInfo
	}
	return fmt.Sprintf("outboxd version %s\nrevision: %s\ngo: %s\n", version, revision, goVersion)
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, VCS revision and Go version of this build",
		Example: `  outboxd version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}
