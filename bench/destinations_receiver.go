package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The destinations scenario's tenants' endpoints are one HTTP server on
// 127.0.0.1: a destination's URL is receiverPath + "<tenant>/<n>", so the
// server knows whose request it answers, and it answers 200 at once
// unless it was told that tenant's endpoints fail.
const (
	receiverPath = "/t/"
	// webhookIDHeader is the Standard Webhooks delivery id the sink sends:
	// <sink>/<type>/<key>/<route>/<destination> for a destination row.
	webhookIDHeader = "webhook-id"
	// eventKeyPrefix starts the key of every event the scenario
	// publishes, followed by its sequence number.
	eventKeyPrefix = "e"
)

// failMode is how the failing tenant's endpoints answer.
type failMode int32

const (
	failNone failMode = iota
	// fail500 answers 500 Internal Server Error at once.
	fail500
	// failHang answers nothing: the sink's timeout ends each request.
	failHang
)

// receipt is one request the receiver answered 200: the event's sequence
// number, the tenant, and when it arrived (Unix ns).
type receipt struct {
	seq    int64
	tenant int
	ns     int64
}

// receiver is the endpoints of every tenant.
type receiver struct {
	srv      *http.Server
	base     string // http://127.0.0.1:<port>
	answered atomic.Int64
	lastNs   atomic.Int64 // when the last 200 was answered
	conns    atomic.Int64 // connections accepted, to tell connection churn apart
	failing  atomic.Int64 // tenant whose endpoints fail; -1: none
	mode     atomic.Int32 // failMode of the failing tenant
	// hanging counts the failing tenant's requests held unanswered now,
	// peakHanging the most at once since stopFailing: deliveries the relay
	// cannot spend on other tenants.
	hanging, peakHanging atomic.Int64
	// release ends the hanging requests of a failing tenant (closed by
	// stopFailing), so a relay stops without waiting out their timeout.
	release   atomic.Pointer[chan struct{}]
	recording atomic.Bool
	recorded  atomic.Int64 // receipts kept since record
	mu        sync.Mutex
	receipts  []receipt
}

// startReceiver listens on a free port of 127.0.0.1 and serves until close.
func startReceiver() (*receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	rv := &receiver{base: "http://" + l.Addr().String()}
	rv.failing.Store(-1)
	rv.srv = &http.Server{Handler: rv, ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rv.conns.Add(1)
		}
	}}
	go func() { _ = rv.srv.Serve(l) }()
	return rv, nil
}

// url is the endpoint of tenant's n-th destination.
func (rv *receiver) url(tenant, n int) string {
	return fmt.Sprintf("%s%s%d/%d", rv.base, receiverPath, tenant, n)
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	tenant, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(r.URL.Path, receiverPath), "/", 2)[0])
	if err != nil || !strings.HasPrefix(r.URL.Path, receiverPath) {
		http.Error(w, "no such endpoint", http.StatusNotFound)
		return
	}
	if int64(tenant) == rv.failing.Load() {
		if failMode(rv.mode.Load()) == failHang {
			rv.hang(r.Context())
			return
		}
		http.Error(w, "failing on purpose", http.StatusInternalServerError)
		return
	}
	now := time.Now().UnixNano()
	if rv.recording.Load() {
		seq, err := eventSeq(r.Header.Get(webhookIDHeader))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rv.mu.Lock()
		rv.receipts = append(rv.receipts, receipt{seq: seq, tenant: tenant, ns: now})
		rv.mu.Unlock()
		rv.recorded.Add(1)
	}
	rv.answered.Add(1)
	rv.lastNs.Store(now)
	w.WriteHeader(http.StatusOK)
}

// hang holds a request of the failing tenant until the client gives up
// or stopFailing, counting the requests held at once.
func (rv *receiver) hang(ctx context.Context) {
	n := rv.hanging.Add(1)
	defer rv.hanging.Add(-1)
	for peak := rv.peakHanging.Load(); n > peak && !rv.peakHanging.CompareAndSwap(peak, n); peak = rv.peakHanging.Load() {
	}
	select {
	case <-ctx.Done():
	case <-*rv.release.Load():
	}
}

// eventSeq reads the event's sequence number out of a destination row's
// delivery id.
func eventSeq(id string) (int64, error) {
	parts := strings.Split(id, "/")
	if len(parts) != 5 || !strings.HasPrefix(parts[2], eventKeyPrefix) {
		return 0, fmt.Errorf("delivery id %q is not <sink>/<type>/%s<n>/<route>/<destination>", id, eventKeyPrefix)
	}
	return strconv.ParseInt(strings.TrimPrefix(parts[2], eventKeyPrefix), 10, 64)
}

// fail makes tenant's endpoints answer as mode says, until stopFailing.
func (rv *receiver) fail(tenant int, mode failMode) {
	release := make(chan struct{})
	rv.release.Store(&release)
	rv.mode.Store(int32(mode))
	rv.failing.Store(int64(tenant))
}

// stopFailing makes every endpoint answer 200 again, answers the
// requests left hanging and starts the next phase's count of them.
func (rv *receiver) stopFailing() {
	rv.failing.Store(-1)
	rv.peakHanging.Store(0)
	if r := rv.release.Load(); r != nil {
		close(*r)
		rv.release.Store(nil)
	}
}

// record starts keeping a receipt of every 200; takeReceipts stops it
// and returns them.
func (rv *receiver) record() {
	rv.mu.Lock()
	rv.receipts = nil
	rv.mu.Unlock()
	rv.recorded.Store(0)
	rv.recording.Store(true)
}

func (rv *receiver) takeReceipts() []receipt {
	rv.recording.Store(false)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := rv.receipts
	rv.receipts = nil
	return out
}

func (rv *receiver) close() {
	rv.stopFailing()
	if err := rv.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "receiver:", err)
	}
}

// waitFor waits until count, less its value before, reaches n, or fails
// after timeout.
func waitFor(ctx context.Context, count *atomic.Int64, before int64, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for count.Load()-before < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d deliveries arrived after %s", count.Load()-before, n, timeout)
		}
		if !sleepCtx(ctx, 5*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}
