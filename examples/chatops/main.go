// Command chatops is a custom build of outboxd for chat notifications: it
// registers only the sink types it needs (log, Slack, Microsoft Teams and
// Mattermost), so the broker clients and the other sinks stay out of the
// binary, and calls the same entry point as outboxd: the same CLI,
// plugins.yaml, routes, retries, rate limits, dead letters and tracing.
//
//	sinks:
//	  ops-slack:
//	    type: slack
//	    options: {token: "${SLACK_BOT_TOKEN}", channel: C0123ABCD}
//	  ops-teams:
//	    type: teams
//	    options: {url: "${TEAMS_WEBHOOK_URL}"}
//	  chat:
//	    type: mattermost
//	    options: {url: "${MATTERMOST_WEBHOOK_URL}"}
package main

import (
	"github.com/outboxd/outboxd/cmd"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/mattermost"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/teams"
)

// types are the sink types this build registers.
func types() []registry.Type {
	return []registry.Type{registry.Log, slack.Type, teams.Type, mattermost.Type}
}

func main() {
	for _, t := range types() {
		registry.Register(t)
	}
	cmd.Main()
}
