package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/crashchild"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// digestMembers is the number of rows of the one digest the tests below
// send; the first half of them is claimed while a transaction of the test
// locks the other half, as another relay's claim would a moment before.
const digestMembers = 10

// oneDigestLease is the lease of the relays that take a digest over: long
// enough that a call the receiver holds (see dedupReceiver) outlasts no
// lease, however busy the machine.
const oneDigestLease = time.Minute

// A digest recorded by a relay whose post failed (its members pending,
// digest_id set) is sent by exactly one of two relays, whole: one of them
// claims half the members while the other half is locked by another claim
// (here the test's transaction) and hands its half back instead of posting
// it under the digest's webhook-id; once the lock goes, one relay posts all
// ten. The receiver, de-duplicating on webhook-id as docs/webhooks.md tells
// receivers to, accepts every member exactly once, and every row marked
// sent was in the call it accepted. (Mutation: claim_digest_members.sql
// taking a digest with the members it could lock, its count check
// removed, posts the two halves under one webhook-id, the receiver drops
// the second and five rows are marked sent unaccepted; so did the code
// before issue 40's item 6.)
func TestTwoRelaysSendARecordedDigestWholeOnce(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	ids := enqueueNumbered(t, pool, ob)
	recordFailedDigest(t, pool, ob, ids)
	rc := newDedupReceiver(t, true, http.StatusOK)
	signals := &relaysignal.Relay{}
	for range 2 {
		testrelay.RunWith(t, pool, ob.Schema(), oneDigestConfig(t, rc), signals)
	}
	claimHalfWhileOtherHalfLocked(t, pool, ob, ids, rc, signals)
	signals.WaitWritten(t, relayDeadline, "hook", "sent", digestMembers)
	rc.checkEveryMemberAcceptedOnce(t)
	if c := testdb.StatusCounts(t, pool, ob, ""); c["sent"] != digestMembers {
		t.Errorf("statuses %v, want all %d sent", c, digestMembers)
	}
}

// The crashing relay of the test below runs in a child process that reads
// its outbox schema and receiver's URL from these variables.
const (
	digestOnceSchemaEnv = "OUTBOXD_WEBHOOK_DIGEST_ONCE_SCHEMA"
	digestOnceURLEnv    = "OUTBOXD_WEBHOOK_DIGEST_ONCE_URL"
)

// digestCrashLease is the crashing relay's lease: short, so its members
// are free for the relay that takes them over soon after it died.
const digestCrashLease = 2 * time.Second

// A relay SIGKILLed after its digest's post was accepted, before its
// members were marked sent, leaves a digest the relay that takes it over
// sends again under the same webhook-id with the same ten members, though
// half of them are locked by another claim when it first claims the
// others: it hands its half back rather than post it alone, and posts the
// whole digest once the lock goes. (Mutation: claim_digest_members.sql
// taking a digest with the members it could lock, its count check removed,
// re-sends five members under the webhook-id, which the receiver drops as
// a repeat while they are marked sent; so did the code before issue 40's
// item 6.)
func TestDigestResentAfterCrashCarriesItsRecordedMembers(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	ids := enqueueNumbered(t, pool, ob)
	rc := newDedupReceiver(t, true, http.StatusOK)
	crashchild.Run(t, "TestDigestCrashChild", digestOnceSchemaEnv+"="+ob.Schema(), digestOnceURLEnv+"="+rc.URL)
	if posts := rc.calls(); len(posts) != 1 || len(posts[0].members) != digestMembers {
		t.Fatalf("the child's calls %+v, want one digest of %d members", posts, digestMembers)
	}

	signals := &relaysignal.Relay{}
	testrelay.RunWith(t, pool, ob.Schema(), oneDigestConfig(t, rc), signals)
	claimHalfWhileOtherHalfLocked(t, pool, ob, ids, rc, signals)
	signals.WaitWritten(t, relayDeadline, "hook", "sent", digestMembers)
	posts := rc.calls()
	if len(posts) < 2 {
		t.Fatalf("%d calls, want the child's and the re-sent digest", len(posts))
	}
	for _, p := range posts[1:] {
		if p.id != posts[0].id || !slices.Equal(p.members, posts[0].members) {
			t.Errorf("re-sent %s with members %v, want %s with %v", p.id, p.members, posts[0].id, posts[0].members)
		}
	}
	rc.checkEveryMemberAcceptedOnce(t)
}

// TestDigestCrashChild is the child half of
// TestDigestResentAfterCrashCarriesItsRecordedMembers: a digest relay whose
// sink SIGKILLs its own process as soon as the receiver accepted a digest.
func TestDigestCrashChild(t *testing.T) {
	schema := os.Getenv(digestOnceSchemaEnv)
	if schema == "" {
		t.Skip("run by TestDigestResentAfterCrashCarriesItsRecordedMembers in a child process")
	}
	ob := testdb.Open(t, schema)
	inner := build(t, map[string]any{"url": os.Getenv(digestOnceURLEnv), "allow_private": true})
	signals := testrelay.Run(t, testdb.Pool(t, 4), ob.Schema(), relay.Config{Lease: digestCrashLease, PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: killAfterDigest{inner.(sink.DigestSink)},
			Digest: &sink.DigestPolicy{MaxMessages: digestMembers}}}})
	signals.Written.Wait(t, relayDeadline, "the relay to post and die", func(all []relaysignal.Outcome) bool { return len(all) > 0 })
	t.Fatalf("the relay recorded %+v instead of dying after the post", signals.Written.All())
}

// killAfterDigest is a digest sink that SIGKILLs its process as soon as
// the receiver accepted a digest.
type killAfterDigest struct{ sink.DigestSink }

func (k killAfterDigest) DeliverDigest(ctx context.Context, dg *sink.Digest) error {
	err := k.DigestSink.DeliverDigest(ctx, dg)
	if err == nil {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return err
}

// A member of a recorded digest that cannot be prepared (its template
// fails once) holds the other members back until it can go: the digest's
// first post carries all ten, and the receiver, which took that post but
// whose answer was lost (a 503), drops the repeat while every row is
// marked sent. (Mutation: group() posting the digest without the member,
// waitForMember's hand-back removed, posts nine members under the
// webhook-id; their repeat with the tenth is dropped by the receiver and
// the tenth is marked sent unaccepted.)
func TestDigestWaitsForAMemberThatCannotBePrepared(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	ids := enqueueNumbered(t, pool, ob)
	recordFailedDigest(t, pool, ob, ids)
	rc := newDedupReceiver(t, false, http.StatusServiceUnavailable)
	cfg := oneDigestConfig(t, rc)
	cfg.Stage = &failOnce{key: "m-3"}
	signals := testrelay.Run(t, pool, ob.Schema(), cfg)
	signals.WaitWritten(t, relayDeadline, "hook", "sent", digestMembers)
	rc.checkEveryMemberAcceptedOnce(t)
}

// failOnce is a Stage that fails the first preparation of the row whose
// dedup key is key, as a template reading a lookup that is down would.
type failOnce struct {
	key    string
	failed atomic.Bool
}

func (f *failOnce) Prepare(_ context.Context, _ string, d *sink.Delivery) error {
	if d.DedupKey == f.key && f.failed.CompareAndSwap(false, true) {
		return errors.New("the template's lookup is down")
	}
	return nil
}

// enqueueNumbered enqueues digestMembers rows for sink hook, payload
// {"n": i}, and returns their ids in order.
func enqueueNumbered(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox) []int64 {
	t.Helper()
	msgs := make([]outboxd.Message, digestMembers)
	for i := range msgs {
		msgs[i] = outboxd.Message{Sink: "hook", DedupKey: fmt.Sprintf("m-%d", i), Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	got, err := ob.EnqueueBatch(t.Context(), pool, msgs)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(got))
	for i, r := range got {
		ids[i] = r.ID
	}
	return ids
}

// recordFailedDigest leaves what a relay whose digest of ids failed leaves:
// a digest recorded, no relay holding it, its members pending after one
// attempt.
func recordFailedDigest(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, ids []int64) {
	t.Helper()
	ctx := t.Context()
	var digest int64
	if err := pool.QueryRow(ctx, "INSERT INTO "+ob.Schema()+".digests (sink, key, delivery_id) VALUES ('hook', '', '') RETURNING id").Scan(&digest); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE "+ob.Schema()+".digests SET delivery_id = 'hook/digest-' || id WHERE id = $1", digest); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE "+ob.Schema()+".messages SET digest_id = $1, attempts = 1 WHERE id = ANY($2)", digest, ids); err != nil {
		t.Fatal(err)
	}
}

// oneDigestConfig is a relay of sink hook, a webhook sink calling rc that
// digests up to digestMembers rows.
func oneDigestConfig(t *testing.T, rc *dedupReceiver) relay.Config {
	return relay.Config{Lease: oneDigestLease, PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: build(t, map[string]any{"url": rc.URL, "allow_private": true}),
			Digest:  &sink.DigestPolicy{MaxMessages: digestMembers},
			Backoff: relay.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}}}}
}

// claimHalfWhileOtherHalfLocked locks the second half of ids, as another
// relay's claim does for a moment, until a relay has claimed the first
// half and either handed it back (its digest is not whole) or called the
// receiver with it; then lets go.
func claimHalfWhileOtherHalfLocked(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, ids []int64, rc *dedupReceiver, signals *relaysignal.Relay) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	half := ids[:len(ids)/2]
	if _, err := tx.Exec(t.Context(), "SELECT id FROM "+ob.Schema()+".messages WHERE id = ANY($1) FOR UPDATE", ids[len(ids)/2:]); err != nil {
		t.Fatal(err)
	}
	before := len(rc.calls())
	testrelay.WaitFor(t, relayDeadline, "a relay to hand back the unlocked half or call with it", func() bool {
		handedBack := map[int64]bool{}
		for _, o := range signals.Written.All() {
			if o.Status == "pending" && o.Written && slices.Contains(half, o.ID) {
				handedBack[o.ID] = true
			}
		}
		return len(handedBack) == len(half) || len(rc.calls()) > before
	})
	if err := tx.Rollback(t.Context()); err != nil && err != pgx.ErrTxClosed {
		t.Fatal(err)
	}
}

// dedupReceiver is a webhook endpoint that de-duplicates on webhook-id, as
// docs/webhooks.md tells receivers to: the first call of an id is
// accepted, and answered first (a status other than 200 is an answer lost
// after the receiver took the call), a later one answered 200 and
// dropped. With holdPartial, a first call carrying fewer than
// digestMembers members is answered only once another call of its id
// arrived, the widest window for a race: two relays posting parts of one
// digest at once.
type dedupReceiver struct {
	*httptest.Server
	holdPartial bool
	first       int
	mu          sync.Mutex
	posts       []digestCall
	kept        map[string][]int // the accepted call's members, by webhook-id
	held        map[string]chan struct{}
}

// digestCall is one call: its webhook-id and its members' numbers.
type digestCall struct {
	id      string
	members []int
}

func newDedupReceiver(t *testing.T, holdPartial bool, first int) *dedupReceiver {
	rc := &dedupReceiver{holdPartial: holdPartial, first: first, kept: map[string][]int{}, held: map[string]chan struct{}{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *dedupReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var list []struct{ N int }
	if err == nil {
		err = json.Unmarshal(body, &list)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("not a digest: %v", err), http.StatusBadRequest)
		return
	}
	call := digestCall{id: r.Header.Get("webhook-id")}
	for _, m := range list {
		call.members = append(call.members, m.N)
	}
	rc.mu.Lock()
	rc.posts = append(rc.posts, call)
	if _, repeat := rc.kept[call.id]; repeat {
		if ch, ok := rc.held[call.id]; ok {
			close(ch)
			delete(rc.held, call.id)
		}
		rc.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	rc.kept[call.id] = call.members
	var wait chan struct{}
	if rc.holdPartial && len(call.members) < digestMembers {
		wait = make(chan struct{})
		rc.held[call.id] = wait
	}
	rc.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(rc.first)
}

// calls returns every call so far, in arrival order.
func (rc *dedupReceiver) calls() []digestCall {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.posts)
}

// checkEveryMemberAcceptedOnce fails t unless the accepted calls carried
// every row exactly once: with every row marked sent, no row was marked
// sent that no accepted call carried.
func (rc *dedupReceiver) checkEveryMemberAcceptedOnce(t *testing.T) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[int]int{}
	for _, members := range rc.kept {
		for _, n := range members {
			seen[n]++
		}
	}
	for n := range digestMembers {
		if seen[n] != 1 {
			t.Errorf("row %d is in %d accepted calls, want 1 (accepted: %v; every call: %+v)", n, seen[n], rc.kept, rc.posts)
		}
	}
}
