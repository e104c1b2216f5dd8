// Package routing turns plugins.yaml's routes into what the database and
// the relay need: the routes that publish() reads (Versions.Apply, from the
// front door's outboxd.Outbox.Routes), and a relay stage that renders each
// published row with its route's template before its sink delivers it
// (Table.Stage).
//
// A route sends the events whose type matches one of its patterns ("*" is
// one dotted segment, "**" any number) to each of its targets; a target is
// a sink and, optionally, a template per field of the sink's payload:
//
//	routes:
//	  orders:
//	    events: [order.*]
//	    to:
//	      - sink: ops-slack
//	        template:
//	          text: "New order {{.data.id}} for {{json .data.total}} {{.data.currency}}"
//	      - partner   # a webhook: the Standard Webhooks envelope {"type", "timestamp", "data"}
//
// Templates are Go text/template (html/template for HTML fields) with
// missingkey=error and the functions json, default, get, truncate, time
// and slackEscape; they see .type, .key, .data and .created_at. A sink
// declares its payload's fields with [sink.Shaper] (Slack: text, blocks,
// channel; email: subject, text, html, to; webhook: body); a custom sink
// takes any field as a string, or body as its whole payload, and gets the
// event itself when its target has no template.
//
// [Compile] checks the routes against the configured sinks and renders
// every template with a sample event, so that a mistake fails at load.
// docs/events.md is the user's guide; the SQL side (publish(),
// apply_routes(), the tables) is core's migration 003.
package routing
