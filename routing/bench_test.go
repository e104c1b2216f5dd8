package routing_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// blockKitTemplate is a typical alert in Block Kit: a header, a section
// with fields, a context line and a button.
const blockKitTemplate = `[
  {"type": "header", "text": {"type": "plain_text", "text": {{json (truncate 150 .data.title)}}}},
  {"type": "section", "fields": [
    {"type": "mrkdwn", "text": {{json (printf "*Service*\n%s" (slackEscape .data.service))}}},
    {"type": "mrkdwn", "text": {{json (printf "*Severity*\n%s" .data.severity)}}},
    {"type": "mrkdwn", "text": {{json (printf "*Owner*\n%s" (get .data "owner" | default "nobody"))}}},
    {"type": "mrkdwn", "text": {{json (printf "*Opened*\n%s" (time "2006-01-02 15:04 MST" .created_at))}}}
  ]},
  {"type": "context", "elements": [{"type": "mrkdwn", "text": {{json (printf "%s · %s" .type .key)}}}]},
  {"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Runbook"}, "url": {{json .data.runbook}}}]}
]`

// BenchmarkRenderBlockKit measures what rendering costs one delivery: the
// stage decodes the row's event and renders text and blocks into the Slack
// payload before the Slack sink would post it.
func BenchmarkRenderBlockKit(b *testing.B) {
	table := compile(b, map[string]any{"incidents": map[string]any{"events": []any{"incident.*"}, "to": []any{
		map[string]any{"sink": "ops-slack", "template": map[string]any{
			"text":   "{{.data.title}} ({{.data.severity}})",
			"blocks": blockKitTemplate,
		}}}}}, "")
	stage := table.Stage(nil)
	payload := json.RawMessage(`{"type": "incident.opened", "key": "inc-7", "data": {"title": "Database primary unreachable from eu-west-1",
		"service": "orders-db", "severity": "critical", "owner": "dba-oncall", "runbook": "https://runbooks.example.com/db-failover"}}`)
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d := &sink.Delivery{Route: "incidents", Payload: payload, CreatedAt: created}
		if err := stage.Prepare(ctx, "ops-slack", d); err != nil {
			b.Fatal(err)
		}
	}
}
