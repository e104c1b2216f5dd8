// Package pagerduty is the outboxd sink that sends each message to
// PagerDuty's Events API v2 (POST https://events.pagerduty.com/v2/enqueue)
// as a trigger, an acknowledge or a resolve. [Type] defines it as the sink
// type "pagerduty", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  oncall:
//	    type: pagerduty
//	    options:
//	      routing_key: ${PAGERDUTY_ROUTING_KEY}   # required, a secret
//	      events_url: https://events.pagerduty.com/v2/enqueue  # default DefaultEventsURL
//	      source: billing-db-1     # a trigger's payload.source when the payload has none, default DefaultSource
//	      severity: error          # a trigger's payload.severity when the payload has none, default DefaultSeverity
//	      timeout: 10s             # per request, default DefaultTimeout
//
// routing_key is the integration key of an Events API v2 integration on a
// PagerDuty service. It is a secret: `outboxd config show` and errors never
// show it. events_url is the operator's own: it may be a proxy on a private
// address.
//
// # The payload
//
// A row's payload is a [Payload]: the event's payload fields (summary,
// source, severity, timestamp, component, group, class, custom_details),
// its links, images, client and client_url, and event_action:
//
//	{"summary": "Disk full on db-1", "severity": "critical", "custom_details": {"free": "0 B"}}
//	{"event_action": "acknowledge"}
//	{"event_action": "resolve"}
//
// event_action is trigger when unset. A trigger needs a summary; a summary
// longer than PagerDuty's 1024 characters ([MaxSummary]) is cut to fit,
// ending with "…", since a page with a cut summary is worth more than a
// page PagerDuty refuses. A trigger's timestamp, when the payload has none,
// is the row's enqueue time. An acknowledge or a resolve sends nothing but
// its action and dedup key. Routes' templates render into these fields
// ([Shape]); a route target without a template triggers an incident whose
// summary is the event's type and key and whose custom_details are its
// data.
//
// # The dedup key
//
// The event's dedup_key is the row's ordering key, else its thread key,
// else its delivery id ("<sink>/<dedup key>"). So a trigger, an acknowledge
// and a resolve enqueued with one ordering key land on one incident, in
// that order (rows of an ordering key are delivered in order). A key
// longer than PagerDuty's 255 characters ([MaxDedupKey]) is sent as
// "sha256:" and the hex of its SHA-256, the same for every row of the key.
// An acknowledge or a resolve of a row with neither an ordering key nor a
// thread key fails permanently: its delivery id is no incident's key, and
// PagerDuty would accept it and change nothing.
//
// # Outcomes
//
// 202 is delivered; the receipt holds the action and the dedup_key
// PagerDuty filed the event under. 400 (an invalid event: a routing key
// PagerDuty does not take, an image without src, ...) and other 4xx are
// permanent, with PagerDuty's errors in the row's last error. 429 (the
// routing key's rate limit) pauses the sink for its Retry-After when the
// answer has one and for [DefaultRetryAfter] otherwise, which is how
// PagerDuty answers; no attempt is spent. 5xx, timeouts and connection
// errors are retried. A payload the sink cannot send (an unknown field or
// action, a trigger without summary, a severity other than critical,
// error, warning or info) fails permanently without a request.
//
// # Rate limit
//
// PagerDuty documents 120 events per minute per routing key; a sink has one
// routing key, so its default rate limit is [DefaultRate] per [DefaultPer],
// held across every outboxd process.
//
// # Exactly once
//
// PagerDuty de-duplicates triggers by dedup_key while the incident is open:
// a trigger repeated after an attempt whose outcome outboxd did not learn
// adds an alert to the same incident, not a second incident, and a
// repeated acknowledge or resolve changes nothing more. Once the incident
// is resolved (by its resolve row, by a responder, or by the service's
// auto-resolve), a trigger with the same dedup key opens a new incident:
// a trigger retried after that, or redriven from the dead letters, pages
// again. docs/pagerduty.md says more.
package pagerduty
