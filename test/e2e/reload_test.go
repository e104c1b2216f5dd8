package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/audit"
)

// heldKey is the dedup key whose delivery holdingReceiver holds.
const heldKey = "held"

// holdingReceiver is a webhook endpoint that records, per dedup key, the
// accepted deliveries and the X-Generation header of the last one, and
// holds the request of heldKey until release is closed.
type holdingReceiver struct {
	*httptest.Server
	mu         sync.Mutex
	count      map[string]int
	generation map[string]string
	arrived    chan struct{} // closed when heldKey's first request arrives
	release    chan struct{}
	once       sync.Once
}

func newHoldingReceiver(t *testing.T) *holdingReceiver {
	r := &holdingReceiver{count: map[string]int{}, generation: map[string]string{},
		arrived: make(chan struct{}), release: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, key, _ := strings.Cut(req.Header.Get("webhook-id"), "/")
		if key == heldKey {
			r.once.Do(func() { close(r.arrived) })
			select {
			case <-r.release:
			case <-req.Context().Done():
				return
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.count[key]++
		r.generation[key] = req.Header.Get("X-Generation")
	}))
	t.Cleanup(func() { r.unhold(); r.Close() })
	return r
}

// unhold lets the held request finish (once).
func (r *holdingReceiver) unhold() {
	select {
	case <-r.release:
	default:
		close(r.release)
	}
}

// delivered returns how often key was accepted and the generation header
// of its last delivery.
func (r *holdingReceiver) delivered(key string) (int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[key], r.generation[key]
}

// generationSink is a webhook sink to url that sends X-Generation: gen.
func generationSink(name, url, gen string) string {
	return fmt.Sprintf("  %s:\n    type: webhook\n    options: {url: %q, secret: %q, allow_private: true, timeout: 60s, headers: {X-Generation: %q}}\n",
		name, url, webhookSecret, gen)
}

// reloadLog waits until the server has logged msg n times and returns the
// records with that message.
func reloadLog(t *testing.T, srv *server, msg string, n int) []map[string]any {
	t.Helper()
	var found []map[string]any
	eventually(t, 20*time.Second, fmt.Sprintf("%d log records %q", n, msg), func() bool {
		found = nil
		for line := range strings.Lines(srv.Logs()) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
				found = append(found, rec)
			}
		}
		return len(found) >= n
	})
	return found
}

// hangUp sends SIGHUP to the server.
func hangUp(t *testing.T, srv *server) {
	t.Helper()
	if err := syscall.Kill(srv.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// gauge reads an unlabelled outboxd_ gauge from the server's /metrics.
func gauge(t *testing.T, srv *server, name string) float64 {
	t.Helper()
	for line := range strings.Lines(metricsOf(t, srv)) {
		if fields := strings.Fields(line); len(fields) == 2 && fields[0] == name {
			v, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// TestReloadOnSIGHUPSwapsSinksWithoutDroppingInFlight: serve delivers to
// sink a; a delivery to a is held by its receiver; plugins.yaml changes
// a's header and adds sink b, and SIGHUP reloads it. While the held
// delivery is still in flight, b's row and a new row of a are delivered
// by the new configuration (a's with the new header), without a restart;
// released, the held delivery completes exactly once, with the old
// header, and the old relay reports it drained.
// The console shows b from the reload on.
// Mutations, each failing this test: serve ignoring SIGHUP (signal.Notify
// removed: the process dies); install not reconfiguring the console (its
// page of b answers 404); swap waiting for the old relay to drain
// before starting the new one (b is not delivered while a's delivery is
// held); swap not starting the new relay (v.start(g) removed).
func TestReloadOnSIGHUPSwapsSinksWithoutDroppingInFlight(t *testing.T) {
	t.Parallel()
	recvA, recvB := newHoldingReceiver(t), newHoldingReceiver(t)
	e := newEnv(t, generationSink("a", recvA.URL, "1"), "")
	e.mustRun("migrate")
	srv := e.serve()

	e.mustRun("enqueue", "--sink", "a", "--key", heldKey, "--payload", `{"n":1}`)
	select {
	case <-recvA.arrived:
	case <-time.After(20 * time.Second):
		t.Fatalf("the held delivery never arrived:\n%s", srv.Logs())
	}

	e.writeConfig(generationSink("a", recvA.URL, "2")+generationSink("b", recvB.URL, "1"), "")
	hangUp(t, srv)
	rec := reloadLog(t, srv, "configuration reloaded", 1)[0]
	if added := fmt.Sprint(rec["sinks_added"]); added != "[b]" {
		t.Errorf("sinks_added = %s, want [b]", added)
	}
	// The console shows b, which has no row yet, as configured.
	if resp, err := http.Get(srv.url("/sinks/b")); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Errorf("the console's page of sink b after the reload: %d, want 200", resp.StatusCode)
	}
	e.mustRun("enqueue", "--sink", "b", "--key", "b-1", "--payload", `{"n":2}`)
	e.mustRun("enqueue", "--sink", "a", "--key", "a-2", "--payload", `{"n":3}`)
	eventually(t, 20*time.Second, "b's row and a's new row delivered by the reloaded configuration", func() bool {
		nb, _ := recvB.delivered("b-1")
		na, gen := recvA.delivered("a-2")
		return nb == 1 && na == 1 && gen == "2"
	})
	if n, _ := recvA.delivered(heldKey); n != 0 {
		t.Fatalf("the held delivery finished before it was released (%d)", n)
	}

	recvA.unhold()
	reloadLog(t, srv, "reload: the previous configuration's relay drained its deliveries in flight", 1)
	if n, gen := recvA.delivered(heldKey); n != 1 || gen != "1" {
		t.Errorf("the held delivery arrived %d times with generation %q, want once with 1", n, gen)
	}
	// Delivered, not left in progress for the new relay to retry once
	// the lease expires.
	if counts := e.stats()["a"]; counts["pending"]+counts["in_progress"]+counts["failed"] != 0 {
		t.Errorf("sink a still has rows to deliver after the drain: %v", counts)
	}
}

// TestReloadRefusesAnInvalidFileAndKeepsRunning: a reload of a file with
// a misspelt key is refused: the problem is logged with its key, file and
// line, outboxd_config_last_reload_successful turns 0, and the running
// configuration still delivers; a valid file then reloads, the gauge
// turns 1 and the success timestamp moves forward, and the log says that
// its changed http block needs a restart.
// Mutations, each failing this test: reload recording success whatever
// the outcome (status.Record(true, ...)); logRefused not logging the
// problems; swap ignoring config.Load's error; keepRestartOnly not
// comparing the http block.
func TestReloadRefusesAnInvalidFileAndKeepsRunning(t *testing.T) {
	t.Parallel()
	recv := newReceiver(t)
	e := newEnv(t, webhookSink("a", recv), "")
	e.mustRun("migrate")
	srv := e.serve()
	const ok, at = "outboxd_config_last_reload_successful", "outboxd_config_last_reload_success_timestamp_seconds"
	if v := gauge(t, srv, ok); v != 1 {
		t.Fatalf("%s = %v at start, want 1", ok, v)
	}
	started := gauge(t, srv, at)

	e.writeConfig(webhookSink("a", recv)+"    max_atempts: 3\n", "")
	hangUp(t, srv)
	rec := reloadLog(t, srv, "reload refused: the running configuration stays", 1)[0]
	problem := fmt.Sprint(rec["problem"])
	for _, want := range []string{"sinks.a.max_atempts", e.config + ":"} {
		if !strings.Contains(problem, want) {
			t.Errorf("the logged problem %q does not name %q", problem, want)
		}
	}
	if v := gauge(t, srv, ok); v != 0 {
		t.Errorf("%s = %v after a refused reload, want 0", ok, v)
	}
	// Over HTTP: the command line would load the refused file.
	if code, body := call(t, "POST", srv.url("/v1/messages"), "", `{"sink": "a", "dedup_key": "after-refusal", "payload": {}}`); code != http.StatusCreated {
		t.Fatalf("enqueue after the refused reload: %d %v", code, body)
	}
	eventually(t, 20*time.Second, "the running configuration delivering", func() bool { return recv.deliveries("after-refusal") == 1 })

	// Valid, and changing the http block, which needs a restart.
	e.writeConfig(webhookSink("a", recv), "  query_timeout: 7s")
	hangUp(t, srv)
	reloadLog(t, srv, "configuration reloaded", 1)
	restart := reloadLog(t, srv, "reload: these settings changed in the file but need a restart; the running values stay", 1)[0]
	if settings := fmt.Sprint(restart["settings"]); settings != "[http]" {
		t.Errorf("the restart warning names %s, want [http]", settings)
	}
	if v := gauge(t, srv, ok); v != 1 {
		t.Errorf("%s = %v after a valid reload, want 1", ok, v)
	}
	if v := gauge(t, srv, at); v <= started {
		t.Errorf("%s = %v after a valid reload, not after %v", at, v, started)
	}
}

// TestReloadOverHTTPNeedsTheAdminRole: POST /-/reload with a read token
// is refused with 403 naming the admin role and reloads nothing; with
// the admin token it answers 200 once the new configuration runs, and
// the audit trail records the reload by the admin token's name.
// Mutations, each failing this test: the route registered with
// access.RoleRead; the route registered without authenticate (no
// identity: the admin is refused too); swap not writing its audit entry.
func TestReloadOverHTTPNeedsTheAdminRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  a:\n    type: discard\n", rolesYAML)
	e.mustRun("migrate")
	srv := e.serve()

	code, body := call(t, "POST", srv.url("/-/reload"), readToken, "")
	if code != http.StatusForbidden || body["required_role"] != "admin" {
		t.Errorf("POST /-/reload with a read token: %d %v, want 403 naming admin", code, body)
	}
	if strings.Contains(srv.Logs(), "configuration reloaded") {
		t.Error("a refused request reloaded the configuration")
	}
	e.writeConfig("  a:\n    type: discard\n  b:\n    type: discard\n", rolesYAML)
	code, body = call(t, "POST", srv.url("/-/reload"), apiToken, "")
	if code != http.StatusOK || body["status"] != "reloaded" {
		t.Fatalf("POST /-/reload with the admin token: %d %v, want 200\n%s", code, body, srv.Logs())
	}
	var listed struct{ Entries []audit.Entry }
	if err := json.Unmarshal([]byte(e.mustRun("audit", "list", "--since", "1h", "-o", "json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Entries) == 0 || listed.Entries[0].Action != audit.ActionConfigReload || listed.Entries[0].Actor != "admin" ||
		listed.Entries[0].Role != "admin" || listed.Entries[0].Source != "127.0.0.1" {
		t.Errorf("the newest audit entry is not admin's config_reload from 127.0.0.1: %+v", listed.Entries)
	}
}
