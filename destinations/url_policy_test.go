package destinations_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// A Store given the network policy refuses, with an *InputError naming
// url, a destination URL the policy would refuse at connect time: on a
// loopback, private or link-local address (written as one, or a name
// resolving to one, without naming what it resolved to), with a scheme
// or a port the policy does not allow; at create, at an update changing
// the URL, and when a test event is sent to one stored before (which
// still takes other edits). Nothing refused is stored or sent; an allow
// list opens what it lists. (Mutation: Store.checkURL answering nil
// fails every refusal here.)
func TestURLsMeetTheNetworkPolicyAtTheDoor(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	keys, err := destinations.ParseKeyring(testKey)
	if err != nil {
		t.Fatal(err)
	}
	policy := func(c destinations.NetworkConfig) *destinations.Network {
		t.Helper()
		if c.Schemes == nil {
			c.Schemes = destinations.DefaultSchemes
		}
		n, err := c.Network()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	open := ob.Destinations(keys) // no policy: what a program storing before the policy did
	strict := open.WithNetwork(policy(destinations.NetworkConfig{}))
	refused := func(t *testing.T, err error, says string) {
		t.Helper()
		var input *destinations.InputError
		if !errors.As(err, &input) || !strings.HasPrefix(err.Error(), "url: ") || !strings.Contains(err.Error(), says) {
			t.Fatalf("got %v, want an *InputError naming url and saying %q", err, says)
		}
	}
	ctx := t.Context()

	for _, raw := range []string{"http://127.0.0.1:8080/hook", "http://localhost/hook", "http://[::1]/hook",
		"http://10.1.2.3/hook", "http://169.254.169.254/latest/meta-data", "http://[::ffff:192.168.1.1]/hook"} {
		_, err := strict.Create(ctx, pool, testdb.Actor, "acme", destinations.Spec{URL: raw})
		refused(t, err, "network policy refuses")
		if strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("the refusal of %s names the address the name resolved to: %v", raw, err)
		}
	}
	_, err = open.WithNetwork(policy(destinations.NetworkConfig{Ports: []int{443}})).Create(ctx, pool, testdb.Actor, "acme",
		destinations.Spec{URL: "https://203.0.113.10:8443/hook"})
	refused(t, err, "port 8443")
	_, err = open.WithNetwork(policy(destinations.NetworkConfig{Schemes: []string{"https"}})).Create(ctx, pool, testdb.Actor, "acme",
		destinations.Spec{URL: "http://203.0.113.10/hook"})
	refused(t, err, `scheme "http"`)
	if ds, _, err := open.List(ctx, pool, "acme", "", 0); err != nil || len(ds) != 0 {
		t.Fatalf("after the refusals acme has %d destinations (%v), want none stored", len(ds), err)
	}

	public, err := strict.Create(ctx, pool, testdb.Actor, "acme", destinations.Spec{URL: "https://203.0.113.10/hook"})
	if err != nil {
		t.Fatalf("a public address: %v", err)
	}
	loopback := "http://127.0.0.1:9/hook"
	_, err = strict.Update(ctx, pool, testdb.Actor, "acme", public.ID, destinations.Patch{URL: &loopback})
	refused(t, err, "network policy refuses")
	if d, err := open.Get(ctx, pool, "acme", public.ID); err != nil || d.URL != "https://203.0.113.10/hook" {
		t.Fatalf("after the refused update the destination is at %q (%v), want unchanged", d.URL, err)
	}

	old, err := open.Create(ctx, pool, testdb.Actor, "acme", destinations.Spec{URL: loopback})
	if err != nil {
		t.Fatal(err)
	}
	note := "stored before the policy"
	if _, err := strict.Update(ctx, pool, testdb.Actor, "acme", old.ID, destinations.Patch{URL: &loopback, Description: &note}); err != nil {
		t.Errorf("an edit leaving a stored URL as it is: %v, want it taken", err)
	}
	_, err = strict.SendTestEvent(ctx, pool, testdb.Actor, "acme", old.ID, "customers", time.Now())
	refused(t, err, "network policy refuses")
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+ob.Schema()+".messages").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d rows enqueued (%v) after the refused test event, want none", rows, err)
	}

	allowed := open.WithNetwork(policy(destinations.NetworkConfig{Allow: []string{"127.0.0.0/8"}}))
	if _, err := allowed.Create(ctx, pool, testdb.Actor, "acme", destinations.Spec{URL: loopback}); err != nil {
		t.Errorf("a loopback URL under an allow list of 127.0.0.0/8: %v, want it created", err)
	}
}
