package destinations_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestEndpointQuotaHoldsAgainstConcurrentCreates: a tenant with 3 of its
// 5 destinations sends 12 creates at once, held (by a lock on the
// destinations' revision, which every insert takes) until all 12 wait;
// exactly 2 succeed and the rest are refused with a QuotaError naming the
// key and its value, so the tenant ends with 5. Another tenant is not held
// by it.
//
// Mutation, failing this test: quotaUse without its LockTransaction (the
// 12 creates each count 3 before any inserts, and all pass: 15).
func TestEndpointQuotaHoldsAgainstConcurrentCreates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.store.WithQuotas(destinations.Quotas{EndpointsPerTenant: 5, TestEventsPerMinute: destinations.DefaultTestEventsPerMinute})
	ctx := t.Context()
	for range 3 {
		f.create(t, "acme")
	}
	const tries = 12
	pool := testdb.Pool(t, tries+1)
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx) //nolint:errcheck // rolled back below; this is for a failure before
	if _, err := hold.Exec(ctx, `UPDATE `+f.ob.Schema()+`.destinations_state SET revision = revision`); err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		errs = make([]error, tries)
	)
	for i := range tries {
		wg.Go(func() {
			_, errs[i] = st.Create(ctx, pool, testdb.Actor, "acme", destinations.Spec{URL: fmt.Sprintf("https://acme.example/hook/%d", i)})
		})
	}
	testdb.WaitForLockWaiters(ctx, t, f.pool, tries)
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		var quota *destinations.QuotaError
		switch {
		case err == nil:
			created++
		case errors.As(err, &quota):
			if quota.Key != destinations.KeyEndpointsPerTenant || quota.Limit != 5 || quota.Rate {
				t.Errorf("refused with %+v, want the endpoints quota of 5", quota)
			}
		default:
			t.Errorf("create: %v, want success or a QuotaError", err)
		}
	}
	if page, _, err := st.List(ctx, f.pool, "acme", "", 0); err != nil || len(page) != 5 || created != 2 {
		t.Errorf("acme has %d destinations (%v) after %d of %d concurrent creates succeeded; want 5 after 2", len(page), err, created, tries)
	}
	if _, err := st.Create(ctx, f.pool, testdb.Actor, "globex", destinations.Spec{URL: "https://globex.example/hook"}); err != nil {
		t.Errorf("another tenant's create: %v", err)
	}
}

// TestTestEventQuotaCountsTheLastMinute: with a quota of 3 test events a
// minute, a tenant's fourth within the minute is refused as a rate (with
// when to retry, at most a minute) and enqueues nothing; another tenant
// still sends; once the tenant's test events are older than a minute it
// sends again. Each test event is recorded in the audit trail.
//
// Mutation, failing this test: checkTestEvents comparing with > instead
// of >= (the fourth is accepted).
func TestTestEventQuotaCountsTheLastMinute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.store.WithQuotas(destinations.Quotas{EndpointsPerTenant: destinations.DefaultEndpointsPerTenant, TestEventsPerMinute: 3})
	ctx := t.Context()
	acme, globex := f.create(t, "acme"), f.create(t, "globex")
	send := func(tenant, id string) error {
		_, err := st.SendTestEvent(ctx, f.pool, testdb.Actor, tenant, id, "customers", time.Now())
		return err
	}
	for i := range 3 {
		if err := send("acme", acme.ID); err != nil {
			t.Fatalf("test event %d: %v", i+1, err)
		}
	}
	var quota *destinations.QuotaError
	if err := send("acme", acme.ID); !errors.As(err, &quota) || !quota.Rate || quota.Key != destinations.KeyTestEventsPerMinute ||
		quota.Limit != 3 || quota.RetryAfter <= 0 || quota.RetryAfter > time.Minute {
		t.Fatalf("the fourth test event: %v (%+v); want a rate QuotaError of 3 saying to retry within a minute", err, quota)
	}
	if n := len(f.rows(t)); n != 3 {
		t.Errorf("%d rows after the refusal, want the 3 test events only", n)
	}
	if err := send("globex", globex.ID); err != nil {
		t.Errorf("another tenant's test event: %v", err)
	}
	var audited int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM `+f.ob.Schema()+`.audit_log WHERE action = 'destination_test_event' AND filter->>'tenant' = 'acme'`).Scan(&audited); err != nil || audited != 3 {
		t.Errorf("%d test events of acme audited (%v), want 3", audited, err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE `+f.ob.Schema()+`.audit_log SET at = at - interval '61 seconds'`); err != nil {
		t.Fatal(err)
	}
	if err := send("acme", acme.ID); err != nil {
		t.Errorf("a test event after the minute: %v", err)
	}
}

// TestDeleteCountedDeletesExactlyWhatWasCounted: a count names the
// destination's waiting rows with a token; after a row arrives the token
// deletes nothing and answers the new count and token, which then delete
// the destination with both rows. A token no count made is refused.
//
// Mutation, failing this test: DeleteCounted not comparing the tokens
// (the stale token deletes the destination).
func TestDeleteCountedDeletesExactlyWhatWasCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d := f.create(t, "acme")
	enqueue := func(key string) {
		if _, err := f.ob.EnqueueDestination(ctx, f.pool, d.ID, outboxd.Message{Sink: "customers", DedupKey: key, Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("first")
	counted, err := f.store.CountDelete(ctx, f.pool, "acme", d.ID)
	if err != nil || counted.Rows != 1 || counted.Token == "" {
		t.Fatalf("count: %+v %v; want 1 row and a token", counted, err)
	}
	enqueue("second")
	now, err := f.store.DeleteCounted(ctx, f.pool, testdb.Actor, "acme", d.ID, counted.Token)
	if !errors.Is(err, destinations.ErrCountChanged) || now.Rows != 2 || now.Token == counted.Token {
		t.Fatalf("the stale token: %+v %v; want ErrCountChanged with the 2 rows and a new token", now, err)
	}
	if _, err := f.store.Get(ctx, f.pool, "acme", d.ID); err != nil {
		t.Fatalf("after the stale token: %v; want the destination still there", err)
	}
	if _, err := f.store.DeleteCounted(ctx, f.pool, testdb.Actor, "acme", d.ID, "nonsense"); !errors.Is(err, destinations.ErrInvalidToken) {
		t.Errorf("a token no count made: %v, want ErrInvalidToken", err)
	}
	done, err := f.store.DeleteCounted(ctx, f.pool, testdb.Actor, "acme", d.ID, now.Token)
	if err != nil || done.Rows != 2 {
		t.Fatalf("the new token: %+v %v; want the 2 rows deleted", done, err)
	}
	if _, err := f.store.Get(ctx, f.pool, "acme", d.ID); !errors.Is(err, destinations.ErrNotFound) {
		t.Errorf("after the delete: %v, want ErrNotFound", err)
	}
}
