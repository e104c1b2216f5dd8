package config

import (
	"strings"
	"testing"
	"time"
)

// TestDigestBlocksLoad: a sink's digest and a route target's digest (with
// its key and digest template) load into the relay's policies, the
// default max_messages filled in.
// (Mutation: coreSink not copying the digest leaves the sink undigested;
// compileRoutes not setting RouteDigests leaves the route undigested.)
func TestDigestBlocksLoad(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`sinks:
  chat:
    type: slack
    options: {token: xoxb-1, channel: C0123}
    digest: {window: 10s, max_messages: 20, key: "{{.data.service}}"}
  hook: {type: webhook, options: {url: "https://example.com/hook"}}
routes:
  orders:
    events: [order.*]
    to:
      - sink: hook
        template: {body: '{"id": {{json .data.id}}}'}
        digest:
          window: 5s
          template: {body: '{"count": {{len .messages}}, "ids": [{{range $i, $m := .messages}}{{if $i}},{{end}}{{json $m.data.id}}{{end}}]}'}
`), "p.yaml", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range cfg.SinkConfigs() {
		switch sc.Name {
		case "chat":
			if sc.Digest == nil || sc.Digest.Window != 10*time.Second || sc.Digest.MaxMessages != 20 || sc.Digest.Key == nil {
				t.Errorf("chat's digest %+v, want 10s, 20 and a key", sc.Digest)
			}
		case "hook":
			p := sc.RouteDigests["orders"]
			if sc.Digest != nil || p == nil || p.Window != 5*time.Second {
				t.Errorf("hook's digests %+v / %+v, want route orders' 5s only", sc.Digest, p)
			}
		}
	}
}

// TestDigestProblemsNameTheirKeys: a digest key that does not parse, a
// template on a sink's digest, a negative window, a digest template that
// fails on the sample and a digest for a sink type that cannot deliver
// one are each reported at their key and line.
// (Mutation: checkDigests not parsing the key, or compileRoute not
// rendering the digest template with the sample, drops its problem.)
func TestDigestProblemsNameTheirKeys(t *testing.T) {
	t.Parallel()
	doc := `sinks:
  chat:
    type: slack
    options: {token: xoxb-1, channel: C0123}
    digest:
      key: "{{.data.service"
      template: {text: x}
  logs: {type: log}
  hook: {type: webhook, options: {url: "https://example.com/hook"}}
routes:
  orders:
    events: [order.*]
    to:
      - sink: hook
        digest:
          template: {body: '{{len .nope}}'}
  refunds:
    events: [refund.*]
    to:
      - sink: hook
        digest: {window: -1s}
      - sink: logs
        digest: {window: 1s}
`
	problems := strings.Join(problemsOf(t, doc, nil), "\n")
	for _, want := range []string{
		"p.yaml:6:7: sinks.chat.digest.key: template: key:1: unclosed action",
		"p.yaml:7:7: sinks.chat.digest.template: a digest template renders a route's events",
		"p.yaml:16:22: routes.orders.to[0].digest.template.body: route orders, sink hook: rendering a digest of the sample event",
		"p.yaml:21:18: routes.refunds.to[0].digest.window: route refunds, sink hook: must not be negative, got -1s",
		"p.yaml:23:9: routes.refunds.to[1].digest: route refunds, sink logs: this sink type cannot deliver digests",
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, problems)
		}
	}
}

// TestBrokerSinksAreRefusedADigest: only Slack, email and webhook sinks
// deliver digests (docs/digests.md); a digest on a Kafka, NATS, RabbitMQ
// or destinations sink, or on a route's target of one, is a problem at its
// key, as `outboxd config check` reports it.
// (Mutation checked: digestProblems in core/relay not requiring a
// sink.DigestSink drops the sinks' four problems; routing's compileTable
// not checking a target's sink drops the route's.)
func TestBrokerSinksAreRefusedADigest(t *testing.T) {
	t.Parallel()
	doc := `sinks:
  stream:
    type: nats
    options: {url: "nats://127.0.0.1:4222", subject: orders}
    digest: {window: 5s}
  queue:
    type: rabbitmq
    options: {url: "amqp://127.0.0.1:5672/orders", exchange: orders, routing_key: orders}
    digest: {window: 5s}
  topic:
    type: kafka
    options: {brokers: ["127.0.0.1:9092"], topic: orders}
    digest: {window: 5s}
  customers:
    type: destinations
    rate_limit: {rate: 5, per: 1s, per_key: true}
    digest: {window: 5s}
  chat:
    type: slack
    options: {token: xoxb-1, channel: C0123}
    digest: {window: 5s}
  mail:
    type: email
    options: {smtp: "127.0.0.1:1025", tls: none, from: "outboxd@example.com", to: ["ops@example.com"]}
    digest: {window: 5s}
  hook:
    type: webhook
    options: {url: "https://example.com/hook"}
    digest: {window: 5s}
  events:
    type: kafka
    options: {brokers: ["127.0.0.1:9092"], topic: events}
routes:
  orders:
    events: [order.*]
    to:
      - sink: events
        digest: {window: 5s}
`
	problems := problemsOf(t, doc, nil)
	joined := strings.Join(problems, "\n")
	for _, want := range []string{
		"p.yaml:5:5: sinks.stream.digest: needs a sink that delivers digests",
		"p.yaml:9:5: sinks.queue.digest: needs a sink that delivers digests",
		"p.yaml:13:5: sinks.topic.digest: needs a sink that delivers digests",
		"p.yaml:17:5: sinks.customers.digest: needs a sink that delivers digests",
		"p.yaml:38:9: routes.orders.to[0].digest: route orders, sink events: this sink type cannot deliver digests",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	if len(problems) != 5 {
		t.Errorf("%d problems, want the 5 above (Slack, email and webhook digest):\n%s", len(problems), joined)
	}
}
