package kafka

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// DeliveryIDHeader is the record header that carries the message's
// delivery id (sink.Delivery.DeliveryID), the same on every copy of a
// message and unique across sinks and route targets: the id consumers
// drop duplicates on.
const DeliveryIDHeader = "outbox-delivery-id"

// DedupKeyHeader is the record header that carries the row's dedup key
// alone, unique per sink only.
const DedupKeyHeader = "outbox-dedup-key"

// maxTopicLength is Kafka's limit on a topic name.
const maxTopicLength = 249

// Sink produces each message as one Kafka record with an idempotent
// producer and acknowledgement from all in-sync replicas. It is safe for
// concurrent use: deliveries share one client.
type Sink struct {
	name   string
	cfg    config
	client *kgo.Client
	redact secret.Scrubber
}

// Receipt is what a sent row's receipt column records: where the record
// was written.
type Receipt struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Type is the kafka sink type, "kafka" in plugins.yaml, with its options
// ([Options]); package sinks/builtin lists it.
var Type = registry.Define("kafka", Description, DefaultOptions(), newSink)

// Description says in one line what a kafka sink delivers to.
const Description = "Produces each message as one Kafka record, idempotently, acknowledged by all in-sync replicas"

// newSink builds the kafka sink called name from its decoded options. The
// client connects lazily: the first delivery dials the brokers. See the
// package documentation for the options.
func newSink(name string, o Options, _ sink.Env) (*Sink, error) {
	c, err := o.check()
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID("outboxd-" + name),
		kgo.DialTimeout(c.ConnectTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()), // with idempotent writes, franz-go's default
		kgo.RecordDeliveryTimeout(c.Timeout),
		kgo.MaxBufferedRecords(c.MaxInFlight),
	}
	if c.TLS {
		opts = append(opts, kgo.DialTLS())
	}
	if m := saslMechanism(c); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &Sink{name: name, cfg: c, client: client, redact: secret.NewScrubber(string(c.Password))}, nil
}

func saslMechanism(c config) sasl.Mechanism {
	switch c.SASLMechanism {
	case SASLPlain:
		return plain.Auth{User: c.Username, Pass: string(c.Password)}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: c.Username, Pass: string(c.Password)}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: c.Username, Pass: string(c.Password)}.AsSha512Mechanism()
	}
	return nil
}

// Deliver produces d as one record and returns once all in-sync replicas
// acknowledged it. See the package documentation for the record and how
// failures map to outcomes.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	rec, err := s.record(ctx, d)
	if err != nil {
		return s.wrap(sink.Permanent(err))
	}
	if err := s.produce(ctx, rec); err != nil {
		return s.wrap(err)
	}
	return d.SetReceipt(Receipt{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset})
}

// produce hands rec to the client and waits for its acknowledgement
// within ctx. The client stops waiting for a record once it is on the
// wire, so the wait here ends at ctx's deadline even then; the record may
// still be written, and its retry is a duplicate under the same dedup key.
func (s *Sink) produce(ctx context.Context, rec *kgo.Record) error {
	done := make(chan error, 1)
	s.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return classify(err)
	case <-ctx.Done():
		return fmt.Errorf("no acknowledgement before the delivery deadline: %w", ctx.Err())
	}
}

// record builds the record of d: keyed by the ordering key (so one key's
// records share a partition, in order) or else the dedup key, the payload
// as it was enqueued, and headers with the dedup key, the row's own
// headers and the delivery's trace context.
func (s *Sink) record(ctx context.Context, d *sink.Delivery) (*kgo.Record, error) {
	topic, err := s.cfg.topic.Render(s.name, d)
	if err != nil {
		return nil, err
	}
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	key := d.OrderingKey
	if key == "" {
		key = d.DedupKey
	}
	headers := sinks.MessageHeaders(ctx, d)
	rec := &kgo.Record{
		Topic:   topic,
		Key:     []byte(key),
		Value:   d.Payload,
		Headers: make([]kgo.RecordHeader, 0, len(headers)+2),
	}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: DeliveryIDHeader, Value: []byte(d.DeliveryID())},
		kgo.RecordHeader{Key: DedupKeyHeader, Value: []byte(d.DedupKey)})
	for k, v := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return rec, nil
}

// Close closes the client; records still buffered fail. Deliveries after
// Close fail.
func (s *Sink) Close() error {
	s.client.Close()
	return nil
}

var _ sink.Checker = (*Sink)(nil)

// Check connects to the brokers (with TLS and SASL as configured) and asks
// them for their metadata; nothing is produced.
func (s *Sink) Check(ctx context.Context) error {
	if err := s.client.Ping(ctx); err != nil {
		return s.wrap(fmt.Errorf("ping: %w", err))
	}
	return nil
}

// wrap names the sink in err, keeping its class, and removes secrets a
// client error might quote.
func (s *Sink) wrap(err error) error {
	return s.redact.Error(fmt.Errorf("kafka %q: %w", s.name, err))
}

// checkTopic refuses a rendered topic Kafka would reject.
func checkTopic(topic string) error {
	if topic == "" || topic == "." || topic == ".." || len(topic) > maxTopicLength ||
		strings.ContainsFunc(topic, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		}) {
		return fmt.Errorf("topic %q is not a valid Kafka topic name (1 to %d of a-z A-Z 0-9 . _ -)", topic, maxTopicLength)
	}
	return nil
}
