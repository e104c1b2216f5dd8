package cmd

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/server/telemetry"
)

// Version is the version `outboxd version` and `outboxd --version` print.
// Release and image builds set it with -ldflags "-X
// github.com/outboxd/outboxd/cmd.Version=v1.2.3"; otherwise it is the
// module version Go recorded, "(devel)" for a build from a checkout.
var Version = ""

// unknownBuildInfo stands for what a binary built without module or VCS
// information cannot tell.
const unknownBuildInfo = "unknown"

// build is this build's version (Version, else the module version), VCS
// revision and Go version, from the binary's build information, with the
// revision's notes: its time, and "modified" for a build from a dirty
// tree. A revision needs a build from a git checkout with VCS stamping on
// (go build -buildvcs=auto or true; `make build` asks for it).
func build() (info telemetry.BuildInfo, revisionNotes []string) {
	info = telemetry.BuildInfo{Version: Version, Revision: unknownBuildInfo, GoVersion: unknownBuildInfo}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		info.GoVersion = bi.GoVersion
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if r := settings["vcs.revision"]; r != "" {
			info.Revision = r
			if t := settings["vcs.time"]; t != "" {
				revisionNotes = append(revisionNotes, t)
			}
			if settings["vcs.modified"] == "true" {
				revisionNotes = append(revisionNotes, "modified")
			}
		}
	}
	if info.Version == "" {
		info.Version = unknownBuildInfo
	}
	return info, revisionNotes
}

// versionText is what `outboxd version` and `outboxd --version` print:
// the build's version, revision (with its notes) and Go version.
func versionText() string {
	info, notes := build()
	revision := info.Revision
	if len(notes) > 0 {
		revision += " (" + strings.Join(notes, ", ") + ")"
	}
	return fmt.Sprintf("outboxd version %s\nrevision: %s\ngo: %s\n", info.Version, revision, info.GoVersion)
}

// versionJSON is `outboxd version -o json`: the labels of
// outboxd_build_info, and the revision's notes.
type versionJSON struct {
	Version       string   `json:"version"`
	Revision      string   `json:"revision"`
	RevisionNotes []string `json:"revision_notes"`
	GoVersion     string   `json:"goversion"`
}

func (a *app) versionCommand() *cobra.Command {
	var o output
	c := &cobra.Command{
		Use:   "version [-o json]",
		Short: "Print the version, VCS revision and Go version of this build",
		Example: `  outboxd version
  outboxd version -o json | jq -r .revision`,
		Args:    cobra.NoArgs,
		PreRunE: checkOutput(&o, nil),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.json() {
				info, notes := build()
				return writeJSON(cmd.OutOrStdout(), versionJSON{Version: info.Version, Revision: info.Revision,
					RevisionNotes: append([]string{}, notes...), GoVersion: info.GoVersion})
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
	addOutputFlags(c, &o, `{"version", "revision", "revision_notes", "goversion"}`)
	return c
}
