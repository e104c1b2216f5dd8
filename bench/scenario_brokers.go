package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
	natssink "github.com/outboxd/outboxd/sinks/nats"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// Where the broker scenario publishes: the machine's NATS (JetStream) and
// RabbitMQ, overridable like the database.
const (
	benchNATSURL     = "nats://127.0.0.1:4222"
	benchRabbitMQURL = "amqp://guest:guest@127.0.0.1:5672/"
	// benchStream and benchQueue are created for the scenario and removed
	// after it.
	benchStream  = "OUTBOXD_BENCH"
	benchSubject = "outboxd-bench.events"
	benchQueue   = "outboxd-bench"
	// brokerBatch is the batch size of the DeliverBatch measurement: one
	// claim's worth of the sink's default in-flight bound.
	brokerBatch = 256
	// asyncStallWait bounds the bare async loop's wait for room in its
	// window of outstanding publishes.
	asyncStallWait = 10 * time.Second
)

// How each broker scenario measures: the relay with the broker sink (with
// its defaults, and with 4x the concurrency, to see whether in-flight
// round trips bound it), the relay with a no-op sink (the database side's
// limit in the same conditions), and three loops without a database
// publishing the same messages (the broker's limits).
const (
	modeRelay      = "outboxd relay → sink"
	modeRelayWide  = "outboxd relay → sink, Concurrency 256"
	modeRelayNoop  = "outboxd relay → no-op sink"
	modeSync       = "bare loop, sync publish, 64 publishers"
	modeBatch      = "sink DeliverBatch alone, batches of 256, no database"
	modeAsync      = "bare loop, async publish, 256 outstanding"
	wideRelayLimit = 4 * relay.DefaultConcurrency
	ratioFormat    = "%s: outboxd ÷ bare sync %.2f×, outboxd ÷ bare async %.2f×, outboxd ÷ no-op sink %.2f×, Concurrency 256 ÷ default %.2f×, DeliverBatch ÷ bare async %.2f×"
)

var brokerModes = []string{modeRelay, modeRelayWide, modeRelayNoop, modeSync, modeBatch, modeAsync}

// broker is one broker of the scenario: how to build the sink, how to
// publish without outboxd, and how to count and clear what arrived.
type broker struct {
	name    string
	typ     registry.Type // the sink package's Type: the benchmark builds the sink itself
	options map[string]any
	setup   func(context.Context) (brokerTarget, error)
}

// build makes the broker's sink, as plugins.yaml would.
func (br broker) build() (sink.Sink, error) { return br.typ.New(noopSink, br.options, sink.Env{}) }

// brokerTarget is a broker prepared for the scenario.
type brokerTarget interface {
	publishSync(ctx context.Context, id string, body []byte) error
	publishAsync(ctx context.Context, n int, window int, prefix string) error
	count(ctx context.Context) (int64, error)
	clear(ctx context.Context) error
	close(ctx context.Context)
}

func brokers() []broker {
	natsURL, rabbitURL := envOr("NATS_URL", benchNATSURL), envOr("RABBITMQ_URL", benchRabbitMQURL)
	return []broker{
		{"JetStream", natssink.Type, map[string]any{"url": natsURL, "subject": benchSubject}, func(ctx context.Context) (brokerTarget, error) { return newJetStreamTarget(ctx, natsURL) }},
		{"RabbitMQ", rabbitmq.Type, map[string]any{"url": rabbitURL, "routing_key": benchQueue}, func(ctx context.Context) (brokerTarget, error) { return newRabbitTarget(rabbitURL) }},
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// runBrokers is scenario 8: outboxd delivering a backlog into JetStream
// and into RabbitMQ against bare publisher loops into the same broker in
// the same run (the limit), the modes alternating from run to run.
func (b *bench) runBrokers(ctx context.Context) error {
	for _, br := range brokers() {
		target, err := br.setup(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w (is it running? .ci/run starts it)", br.name, err)
		}
		err = b.measureBroker(ctx, br, target)
		target.close(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", br.name, err)
		}
		relay, async := b.brokerMedian(br, modeRelay), b.brokerMedian(br, modeAsync)
		b.res.note(ratioFormat, br.name, relay/b.brokerMedian(br, modeSync), relay/async, relay/b.brokerMedian(br, modeRelayNoop),
			b.brokerMedian(br, modeRelayWide)/relay, b.brokerMedian(br, modeBatch)/async)
	}
	return nil
}

func (b *bench) brokerMedian(br broker, mode string) float64 {
	return median(b.res.refs[brokerRef(br, mode)])
}

func brokerRef(br broker, mode string) string {
	return fmt.Sprintf("8 brokers, %s, %s (msg/s)", br.name, mode)
}

func (b *bench) measureBroker(ctx context.Context, br broker, target brokerTarget) error {
	n := b.sz.brokerMessages
	for run := range b.sz.runs {
		for _, mode := range rotated(brokerModes, run) {
			b.logf("  run %d %s: %s", run+1, br.name, mode)
			if err := target.clear(ctx); err != nil {
				return err
			}
			prefix := fmt.Sprintf("r%d-%d-", run, time.Now().UnixNano())
			start := time.Now()
			var err error
			switch mode {
			case modeRelay, modeRelayWide, modeRelayNoop:
				start, err = b.relayInto(ctx, br, mode, n)
			case modeSync:
				err = syncLoop(ctx, target, n, relay.DefaultConcurrency, prefix)
			case modeBatch:
				err = batchLoop(ctx, br, n, prefix)
			case modeAsync:
				err = target.publishAsync(ctx, n, brokerBatch, prefix)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			elapsed := time.Since(start)
			got, err := target.count(ctx)
			if err != nil {
				return err
			}
			if mode == modeRelayNoop {
				got = int64(n) // verified by relayInto: every row sent
			}
			if got != int64(n) {
				return fmt.Errorf("%s: the broker holds %d messages, want %d", mode, got, n)
			}
			rate := perSecond(n, elapsed.Nanoseconds())
			b.res.refs[brokerRef(br, mode)] = append(b.res.refs[brokerRef(br, mode)], rate)
			b.logf("    %.0f msg/s", rate)
		}
	}
	return target.clear(ctx)
}

// relayInto enqueues a backlog of n messages and runs outboxd's relay (in
// this process; defaults but for modeRelayWide's concurrency) with the
// broker sink, or a no-op sink for modeRelayNoop, until all are sent. It
// returns when the relay started.
func (b *bench) relayInto(ctx context.Context, br broker, mode string, n int) (time.Time, error) {
	s := b.stores[sysOutboxd.name]
	if err := s.reset(ctx); err != nil {
		return time.Time{}, err
	}
	if err := enqueueBacklog(ctx, s, n); err != nil {
		return time.Time{}, err
	}
	var sink sink.Sink = sink.Func(func(context.Context, *sink.Delivery) error { return nil })
	if mode != modeRelayNoop {
		bs, err := br.build()
		if err != nil {
			return time.Time{}, err
		}
		defer bs.(interface{ Close() error }).Close()
		sink = bs
	}
	concurrency := b.relayConcurrency // experiments only; 0 is the default
	if mode == modeRelayWide {
		concurrency = wideRelayLimit
	}
	ob, err := outboxd.New(s.pool(), outboxd.Options{})
	if err != nil {
		return time.Time{}, err
	}
	relay, err := ob.NewRelay(relay.Config{
		Sinks:       []relay.SinkConfig{{Name: noopSink, Sink: sink}},
		BatchSize:   b.relayBatch, // experiments only; 0 is the default
		Concurrency: concurrency,
		Logger:      quietLogger(),
	})
	if err != nil {
		return time.Time{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- relay.Run(rctx) }()
	deadline := time.Now().Add(b.sz.drain)
	for {
		left, err := s.unfinished(ctx)
		if err != nil || left == 0 || time.Now().After(deadline) {
			cancel()
			<-done
			if err == nil && left > 0 {
				err = fmt.Errorf("%d messages not sent within %s", left, b.sz.drain)
			}
			return start, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncLoop publishes n messages with workers goroutines, each waiting for
// every acknowledgement: outboxd's pattern without the database.
func syncLoop(ctx context.Context, target brokerTarget, n, workers int, prefix string) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := target.publishSync(ctx, fmt.Sprintf("%s%d", prefix, i), benchBody(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// batchLoop hands the sink's DeliverBatch batches of
// deliveries without the database, as the relay does.
func batchLoop(ctx context.Context, br broker, n int, prefix string) error {
	s, err := br.build()
	if err != nil {
		return err
	}
	defer s.(interface{ Close() error }).Close()
	bs := s.(sink.BatchSink)
	for done := 0; done < n; done += brokerBatch {
		ds := make([]*sink.Delivery, min(brokerBatch, n-done))
		for i := range ds {
			id := int64(done + i + 1)
			ds[i] = &sink.Delivery{ID: id, Sink: noopSink, DedupKey: fmt.Sprintf("%s%d", prefix, id), Payload: benchBody(id), Attempt: 1}
		}
		if err := errors.Join(bs.DeliverBatch(ctx, ds)...); err != nil {
			return err
		}
	}
	return nil
}

func benchBody(i int64) []byte { return fmt.Appendf(nil, `{"n": %d}`, i) }

// jetStreamTarget is a file-backed stream over benchSubject.
type jetStreamTarget struct {
	nc     *natsio.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
}

func newJetStreamTarget(ctx context.Context, url string) (*jetStreamTarget, error) {
	nc, err := natsio.Connect(url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(brokerBatch))
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = js.DeleteStream(ctx, benchStream)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: benchStream, Subjects: []string{benchSubject}, Storage: jetstream.FileStorage})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &jetStreamTarget{nc: nc, js: js, stream: stream}, nil
}

func (t *jetStreamTarget) publishSync(ctx context.Context, id string, body []byte) error {
	_, err := t.js.Publish(ctx, benchSubject, body, jetstream.WithMsgID(id))
	return err
}

func (t *jetStreamTarget) publishAsync(ctx context.Context, n, _ int, prefix string) error {
	for i := 1; i <= n; i++ {
		// The window is full until acknowledgements come back: wait for
		// room rather than fail after the client's default 200 ms.
		if _, err := t.js.PublishAsync(benchSubject, benchBody(int64(i)),
			jetstream.WithMsgID(fmt.Sprintf("%s%d", prefix, i)), jetstream.WithStallWait(asyncStallWait)); err != nil {
			return err
		}
	}
	select {
	case <-t.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *jetStreamTarget) count(ctx context.Context) (int64, error) {
	info, err := t.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}

func (t *jetStreamTarget) clear(ctx context.Context) error { return t.stream.Purge(ctx) }

func (t *jetStreamTarget) close(ctx context.Context) {
	_ = t.js.DeleteStream(ctx, benchStream)
	t.nc.Close()
}

// rabbitTarget is a durable queue on the default exchange, published to
// with confirms, mandatory and persistent like the sink.
type rabbitTarget struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	mu   sync.Mutex // serialises publish and its deferred confirm registration
}

func newRabbitTarget(url string) (*rabbitTarget, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil {
		_, err = ch.QueueDeclare(benchQueue, true, false, false, false, nil)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &rabbitTarget{conn: conn, ch: ch}, nil
}

func (t *rabbitTarget) publish(ctx context.Context, id string, body []byte) (*amqp.DeferredConfirmation, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ch.PublishWithDeferredConfirmWithContext(ctx, "", benchQueue, true, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: id, Body: body,
	})
}

func (t *rabbitTarget) publishSync(ctx context.Context, id string, body []byte) error {
	dc, err := t.publish(ctx, id, body)
	if err != nil {
		return err
	}
	return confirmed(ctx, dc)
}

func (t *rabbitTarget) publishAsync(ctx context.Context, n, window int, prefix string) error {
	outstanding := make(chan *amqp.DeferredConfirmation, window)
	errs := make(chan error, 1)
	go func() {
		var err error
		for dc := range outstanding {
			if err == nil {
				err = confirmed(ctx, dc)
			}
		}
		errs <- err
	}()
	for i := 1; i <= n; i++ {
		dc, err := t.publish(ctx, fmt.Sprintf("%s%d", prefix, i), benchBody(int64(i)))
		if err != nil {
			close(outstanding)
			<-errs
			return err
		}
		outstanding <- dc
	}
	close(outstanding)
	return <-errs
}

func confirmed(ctx context.Context, dc *amqp.DeferredConfirmation) error {
	ok, err := dc.WaitContext(ctx)
	if err == nil && !ok {
		err = errors.New("nacked")
	}
	return err
}

func (t *rabbitTarget) count(context.Context) (int64, error) {
	q, err := t.ch.QueueDeclarePassive(benchQueue, true, false, false, false, nil)
	return int64(q.Messages), err
}

func (t *rabbitTarget) clear(context.Context) error {
	_, err := t.ch.QueuePurge(benchQueue, false)
	return err
}

func (t *rabbitTarget) close(context.Context) {
	_, _ = t.ch.QueueDelete(benchQueue, false, false, false)
	_ = t.conn.Close()
}
