package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/console"
	"github.com/outboxd/outboxd/server/internal/apidb"
)

// operatorToken is the bearer token of the in-process API in these tests.
const operatorToken = "operator-test-token"

// operatorAPI is an API (with the console) on a fresh schema, served by
// httptest, and a pool on that schema.
type operatorAPI struct {
	api  *API
	srv  *httptest.Server
	pool *pgxpool.Pool
	ob   *testdb.Outbox
	ctx  context.Context
}

// served is what an operatorAPI's server serves, mounted as serve's mux
// mounts them (server.newMux): the API and, beside it, the metrics and the
// console.
type served struct {
	*API
	metrics, console http.Handler
}

// newOperatorAPI serves an API configured by cfgYAML, with the console
// unless http.ui is false; each option changes it before it starts.
func newOperatorAPI(t *testing.T, cfgYAML string, options ...func(*served)) *operatorAPI {
	t.Helper()
	pool, ob := testdb.New(t)
	cfg, err := config.Parse([]byte(cfgYAML), "test.yaml", config.EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	// The API and the console query through a pool of their own, as in
	// serve.
	apiPool, err := apidb.Open(t.Context(), pool, cfg.HTTP.QueryTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(apiPool.Close)
	s := &served{API: &API{Config: cfg, Outbox: ob.Outbox, Operator: ob.Operator, Migrator: ob.Migrator, DB: apiPool, Log: log,
		Tracing: tracenoop.NewTracerProvider(), Meters: metricnoop.NewMeterProvider()}, metrics: http.NotFoundHandler()}
	if cfg.HTTP.UI {
		s.console = newConsole(t, s.API, log)
	}
	for _, option := range options {
		option(s)
	}
	mux := http.NewServeMux()
	s.Register(mux)
	RegisterOpen(mux, MetricsPath, s.metrics)
	if s.console != nil {
		mux.Handle("/", s.console)
	}
	srv := httptest.NewServer(s.Guard(mux))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &operatorAPI{api: s.API, srv: srv, pool: pool, ob: ob, ctx: ctx}
}

// newConsole is the operator console of api's configuration, with its
// destinations and portal, logging to log; serve's (server.newConsole)
// lists the configured sinks too.
func newConsole(t *testing.T, api *API, log *slog.Logger) *console.Console {
	t.Helper()
	ui, err := console.New(console.Options{Operator: api.Operator, DB: api.DB, QueryTimeout: api.Config.HTTP.QueryTimeout,
		Access: api.Config.HTTP.Authenticator(), TraceURL: api.Config.Telemetry.TraceURL, Logger: log,
		Destinations: api.Destinations, Portal: api.Portal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ui.Close)
	return ui
}

// do sends a request with the token (unless token is "") and decodes the
// JSON answer into out (when not nil); it returns the status.
func (a *operatorAPI) do(t *testing.T, method, path, token, body string, out any) int {
	t.Helper()
	resp, raw := a.send(t, method, path, token, body)
	if out != nil && (resp.StatusCode < 300 || resp.StatusCode == http.StatusConflict) {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

// send sends a JSON request with the token (unless token is "") and
// returns the answer, its body read.
func (a *operatorAPI) send(t *testing.T, method, path, token, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return roundTrip(t, req)
}

// roundTrip sends req and returns the answer, its body read.
func roundTrip(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	return resp, raw
}

// deadRows inserts dead rows of sink with the given last errors and
// returns their ids.
func (a *operatorAPI) deadRows(t *testing.T, sink string, errs ...string) []int64 {
	t.Helper()
	return testdb.DeadRows(t, a.pool, a.ob, sink, errs...)
}

// exec runs statement with {schema} naming the test's schema.
func (a *operatorAPI) exec(t *testing.T, statement string, args ...any) {
	t.Helper()
	if _, err := a.pool.Exec(context.Background(), strings.ReplaceAll(statement, "{schema}", a.ob.Schema()), args...); err != nil {
		t.Fatal(err)
	}
}

const operatorConfig = `http:
  token: ` + operatorToken + `
sinks:
  partner:
    type: webhook
    options: {url: "https://partner.example/hook", secret: "whsec_dGhlLXdlYmhvb2stc2lnbmluZy1zZWNyZXQtMzJieXRlcw=="}
`

// Every operator endpoint wants the bearer token.
// (Mutation: requireToken passing every request fails this test.)
func TestOperatorEndpointsNeedTheToken(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, operatorConfig)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/messages", ""},
		{"GET", "/v1/messages/1", ""},
		{"GET", "/v1/dlq?after=1", ""},
		{"POST", "/v1/dlq/purge", `{"all": true, "dry_run": true}`},
		{"POST", "/v1/dlq/redrive", `{"all": true, "dry_run": true}`},
		{"POST", "/v1/sinks/partner/pause", `{}`},
		{"POST", "/v1/sinks/partner/resume", `{}`},
		{"DELETE", "/v1/sinks/partner/pause", `{}`},
	} {
		if got := a.do(t, c.method, c.path, "", c.body, nil); got != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d, want 401", c.method, c.path, got)
		}
		if got := a.do(t, c.method, c.path, "wrong", c.body, nil); got != http.StatusUnauthorized {
			t.Errorf("%s %s with a wrong token: %d, want 401", c.method, c.path, got)
		}
	}
}

// GET /v1/messages/{id} shows one message; GET /v1/messages pages newest
// first with the before cursor.
func TestMessageEndpoints(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, operatorConfig)
	var ids []int64
	for i := range 7 {
		res, err := a.ob.Enqueue(a.ctx, a.pool, outboxd.Message{Sink: "partner", DedupKey: fmt.Sprint("k-", i), Payload: map[string]int{"n": i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	var m MessageReport
	if got := a.do(t, "GET", fmt.Sprintf("/v1/messages/%d", ids[2]), operatorToken, "", &m); got != http.StatusOK || m.DedupKey != "k-2" || string(m.Payload) != `{"n":2}` {
		t.Fatalf("GET one: %d %+v", got, m)
	}
	if got := a.do(t, "GET", "/v1/messages/999999", operatorToken, "", nil); got != http.StatusNotFound {
		t.Errorf("unknown id: %d, want 404", got)
	}
	if got := a.do(t, "GET", "/v1/messages/x", operatorToken, "", nil); got != http.StatusBadRequest {
		t.Errorf("bad id: %d, want 400", got)
	}

	var seen []int64
	path := "/v1/messages?sink=partner&limit=3"
	for pages := 0; ; pages++ {
		var page operator.MessagePage
		if got := a.do(t, "GET", path, operatorToken, "", &page); got != http.StatusOK {
			t.Fatalf("GET %s: %d", path, got)
		}
		for _, m := range page.Messages {
			seen = append(seen, m.ID)
		}
		if page.Next == 0 {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
		path = fmt.Sprintf("/v1/messages?sink=partner&limit=3&before=%d", page.Next)
	}
	if len(seen) != 7 || seen[0] != ids[6] || seen[6] != ids[0] {
		t.Errorf("paged ids %v, want %v newest first", seen, ids)
	}
	var byKey operator.MessagePage
	a.do(t, "GET", "/v1/messages?sink=partner&dedup_key=k-4&status=pending", operatorToken, "", &byKey)
	if len(byKey.Messages) != 1 || byKey.Messages[0].ID != ids[4] {
		t.Errorf("by key: %+v", byKey)
	}
	for _, q := range []string{"status=lost", "before=-1", "limit=x", "since=yesterday"} {
		if got := a.do(t, "GET", "/v1/messages?"+q, operatorToken, "", nil); got != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, got)
		}
	}
}

// GET /v1/messages/{id} of a digest member shows its digest (id,
// delivery id, key, siblings), as openapi.json describes it; a row in no
// digest has no digest field. The digest is written as record_digest.sql
// writes one (the relay's recording is tested in core/relay; the binary's,
// with a served lookup, in test/events
// TestSlackDigestBesideAnUndigestedRouteUnderABurstWhileServing).
// (Mutation checked: the Message schema of openapi.json without its digest
// property fails this test: additionalProperties is false.)
func TestMessageLookupShowsItsDigest(t *testing.T) {
	t.Parallel()
	_, router := openAPISpec(t)
	a := newOperatorAPI(t, operatorConfig)
	c := &contract{t: t, a: a, router: router, covered: map[string]bool{}}
	var ids []int64
	for i := range 4 {
		res, err := a.ob.Enqueue(a.ctx, a.pool, outboxd.Message{Sink: "partner", DedupKey: fmt.Sprint("k-", i), Payload: map[string]int{"n": i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	members := ids[:3]
	var digestID int64
	if err := a.pool.QueryRow(a.ctx, strings.ReplaceAll(`WITH n AS (SELECT nextval('{schema}.digests_id_seq') AS id), d AS (
			INSERT INTO {schema}.digests (id, sink, key, delivery_id) OVERRIDING SYSTEM VALUE
			SELECT id, 'partner', 'partner-key', 'partner/digest-' || id FROM n RETURNING id)
		UPDATE {schema}.messages SET digest_id = (SELECT id FROM d) WHERE id = ANY($1) RETURNING digest_id`, "{schema}", a.ob.Schema()),
		members).Scan(&digestID); err != nil {
		t.Fatal(err)
	}

	var m struct {
		ID     int64 `json:"id"`
		Digest *struct {
			ID         int64      `json:"id"`
			DeliveryID string     `json:"delivery_id"`
			Key        string     `json:"key"`
			Created    time.Time  `json:"created"`
			SentAt     *time.Time `json:"sent_at"`
			Siblings   []int64    `json:"siblings"`
		} `json:"digest"`
	}
	raw := c.do(exchange{method: "GET", path: fmt.Sprintf("/v1/messages/%d", members[1]), status: http.StatusOK})
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if d := m.Digest; d == nil || d.ID != digestID || d.DeliveryID != fmt.Sprintf("partner/digest-%d", digestID) || d.Key != "partner-key" ||
		d.Created.IsZero() || d.SentAt != nil || !slices.Equal(d.Siblings, []int64{members[0], members[2]}) {
		t.Errorf("GET /v1/messages/%d: %s\nwant digest %d, not sent yet, with siblings %d and %d", members[1], raw, digestID, members[0], members[2])
	}
	var alone map[string]json.RawMessage
	if err := json.Unmarshal(c.do(exchange{method: "GET", path: fmt.Sprintf("/v1/messages/%d", ids[3]), status: http.StatusOK}), &alone); err != nil {
		t.Fatal(err)
	}
	if _, has := alone["digest"]; has {
		t.Errorf("GET /v1/messages/%d of a row in no digest: %v, want no digest field", ids[3], alone)
	}
}

// Redrive and purge count with dry_run, act on a dry run's token, report
// missing ids; GET /v1/dlq filters by error and pages with after.
func TestDeadLetterEndpoints(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, operatorConfig)
	ids := a.deadRows(t, "partner", "503 unavailable", "400 bad request", "503 unavailable", "503 unavailable")

	var page []operator.DeadLetter
	a.do(t, "GET", "/v1/dlq?sink=partner&error=UNAVAILABLE&limit=2", operatorToken, "", &page)
	if len(page) != 2 || page[0].ID != ids[0] || page[1].ID != ids[2] || string(page[0].Payload) != `{"n":1}` {
		t.Fatalf("first page: %+v", page)
	}
	a.do(t, "GET", fmt.Sprintf("/v1/dlq?sink=partner&error=unavailable&after=%d", page[1].ID), operatorToken, "", &page)
	if len(page) != 1 || page[0].ID != ids[3] {
		t.Fatalf("second page: %+v", page)
	}

	var res map[string]any
	a.do(t, "POST", "/v1/dlq/purge", operatorToken, `{"all": true, "sink": "partner", "error": "unavailable", "dry_run": true}`, &res)
	if res["purged"] != 3.0 || res["dry_run"] != true || res["last_id"] != float64(ids[3]) {
		t.Fatalf("dry run: %v", res)
	}
	if c := testdb.StatusCounts(t, a.pool, a.ob, ""); c["dead"] != 4 {
		t.Fatalf("the dry run changed rows: %v", c)
	}
	a.do(t, "POST", "/v1/dlq/redrive", operatorToken, `{"all": true, "error": "unavailable", "dry_run": true}`, &res)
	a.do(t, "POST", "/v1/dlq/redrive", operatorToken, fmt.Sprintf(`{"all": true, "error": "unavailable", "token": %q}`, res["token"]), &res)
	if res["redriven"] != 3.0 || res["dry_run"] != false {
		t.Fatalf("confirmed redrive: %v", res)
	}
	a.do(t, "POST", "/v1/dlq/purge", operatorToken, fmt.Sprintf(`{"ids": [%d, 999999]}`, ids[1]), &res)
	if res["purged"] != 1.0 || fmt.Sprint(res["missing"]) != "[999999]" {
		t.Fatalf("purge with an unknown id: %v", res)
	}
	for _, body := range []string{`{}`, `{"ids": [1], "all": true}`, `{"ids": [1], "error": "x"}`, `{"all": true, "waiting": true}`,
		`{"all": true, "up_to_id": 3}`, `{"all": true, "token": "3"}`} {
		if got := a.do(t, "POST", "/v1/dlq/purge", operatorToken, body, nil); got != http.StatusUnprocessableEntity {
			t.Errorf("purge %s: %d, want 422", body, got)
		}
	}
	if got := a.do(t, "POST", "/v1/dlq/redrive", operatorToken, `{"all": true, "sink": "partner", "waiting": true}`, nil); got != http.StatusUnprocessableEntity {
		t.Errorf("redrive of waiting rows: %d, want 422", got)
	}
	if got := a.do(t, "POST", "/v1/dlq/purge", operatorToken, `{"all": true, "dry_run": "yes"}`, nil); got != http.StatusBadRequest {
		t.Errorf("dry_run of the wrong type: %d, want 400", got)
	}
}

// The reproduction over HTTP: id 1 failed, 2 and 3 dead; a dry
// run of an "all" purge counts 2; id 1 dies; the confirmation purges the 2
// counted and leaves id 1. A confirmation whose counted rows changed
// answers 409 with the new count and its token, and deletes nothing.
// (Mutations, each failing this test: purge.sql without the @dead_until
// bound (the confirmation refused, id 1's death changing the set);
// deadLetterAction answering a changed selection 500 or without the new
// token.)
func TestConfirmedPurgeLeavesAnOlderRowThatDiedAfterTheCount(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, operatorConfig)
	ids := a.deadRows(t, "partner", "503", "503", "503")
	older, counted := ids[0], ids[1:]
	a.exec(t, "UPDATE {schema}.messages SET status = 'failed', attempts = 1 WHERE id = $1", older)

	var plan, res map[string]any
	a.do(t, "POST", "/v1/dlq/purge", operatorToken, `{"all": true, "dry_run": true}`, &plan)
	if plan["purged"] != 2.0 || plan["last_id"] != float64(counted[1]) || plan["token"] == "" {
		t.Fatalf("dry run: %v", plan)
	}
	a.exec(t, "UPDATE {schema}.messages SET status = 'dead', updated_at = now() WHERE id = $1", older)
	if got := a.do(t, "POST", "/v1/dlq/purge", operatorToken, fmt.Sprintf(`{"all": true, "token": %q}`, plan["token"]), &res); got != http.StatusOK || res["purged"] != 2.0 {
		t.Fatalf("confirmed purge: %d %v", got, res)
	}
	if c := testdb.StatusCounts(t, a.pool, a.ob, ""); c["dead"] != 1 {
		t.Fatalf("after the confirmed purge: %v; want the older row that died after the count left", c)
	}

	a.deadRows(t, "other", "503")
	a.do(t, "POST", "/v1/dlq/purge", operatorToken, `{"all": true, "dry_run": true}`, &plan)
	a.do(t, "POST", "/v1/dlq/redrive", operatorToken, fmt.Sprintf(`{"ids": [%d]}`, older), nil)
	got := a.do(t, "POST", "/v1/dlq/purge", operatorToken, fmt.Sprintf(`{"all": true, "token": %q}`, plan["token"]), &res)
	if got != http.StatusConflict || res["rows"] != 1.0 || res["token"] == plan["token"] || !strings.Contains(fmt.Sprint(res["error"]), "changed since it was counted") {
		t.Fatalf("confirmation of a changed selection: %d %v; want 409 with the new count 1", got, res)
	}
	if c := testdb.StatusCounts(t, a.pool, a.ob, ""); c["dead"] != 1 {
		t.Fatalf("a refused confirmation changed rows: %v", c)
	}
}

// Pause and resume a sink by hand, with who and why.
// (Mutation: the pause endpoint not calling PauseSink fails this test.)
func TestSinkPauseEndpoints(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, operatorConfig)
	var st operator.SinkState
	if got := a.do(t, "POST", "/v1/sinks/partner/pause", operatorToken, `{"for": "10m", "by": "alice", "reason": "partner maintenance"}`, &st); got != http.StatusOK {
		t.Fatalf("pause: %d", got)
	}
	// Signed in with the admin token, the sink records who the token is
	// beside the name the request gives.
	if !st.Paused() || !st.ByHand || st.ChangedBy != "alice (admin)" || st.ChangeReason != "partner maintenance" || time.Until(*st.PausedUntil) > 10*time.Minute {
		t.Fatalf("after pause: %+v", st)
	}
	a.do(t, "POST", "/v1/sinks/partner/pause", operatorToken, `{}`, &st)
	if !st.UntilResumed || st.ChangedBy != "admin" {
		t.Fatalf("pause without a duration or a name: %+v", st)
	}
	a.do(t, "POST", "/v1/sinks/partner/resume", operatorToken, `{"by": "bob"}`, &st)
	if st.Paused() || st.ChangedBy != "bob (admin)" {
		t.Fatalf("after resume: %+v", st)
	}
	for path, body := range map[string]string{
		"/v1/sinks/partner/pause":    `{"for": "soon"}`,
		"/v1/sinks/partner/resume":   `{"for": "1m"}`,
		"/v1/sinks/Bad%20Name/pause": `{}`,
	} {
		if got := a.do(t, "POST", path, operatorToken, body, nil); got != http.StatusUnprocessableEntity {
			t.Errorf("POST %s %s: %d, want 422", path, body, got)
		}
	}
	if got := a.do(t, "POST", "/v1/sinks/partner/pause", operatorToken, ``, nil); got != http.StatusBadRequest {
		t.Errorf("pause without a body: %d, want 400", got)
	}
}

// A pause of a name that is neither configured nor has messages is a 404
// (a typo's pause would stop nothing while the sink meant delivers) unless
// forced; the forced pause shows in the stats, and DELETE forgets it, which
// a configured sink refuses. (Mutations: postPause without its
// CheckSinkKnown answers 200 for "nosuch"; Stats without the pause states
// leaves the phantom out; deletePause not calling ForgetSink leaves it in.)
func TestPausingAnUnknownSinkNeedsForceAndCanBeForgotten(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, operatorConfig)
	if got := a.do(t, "POST", "/v1/sinks/nosuch/pause", operatorToken, `{}`, nil); got != http.StatusNotFound {
		t.Fatalf("pause of nosuch: %d, want 404", got)
	}
	var report StatsReport
	a.do(t, "GET", "/v1/stats", operatorToken, "", &report)
	if _, listed := report.Sinks["nosuch"]; listed {
		t.Fatalf("the refused pause left nosuch in the stats: %+v", report.Sinks)
	}
	var st operator.SinkState
	if got := a.do(t, "POST", "/v1/sinks/nosuch/pause", operatorToken, `{"force": true}`, &st); got != http.StatusOK || !st.Paused() {
		t.Fatalf("forced pause of nosuch: %d %+v, want 200 and paused", got, st)
	}
	// Configured and not yet seen is fine without force.
	if got := a.do(t, "POST", "/v1/sinks/partner/pause", operatorToken, `{"for": "1m"}`, nil); got != http.StatusOK {
		t.Fatalf("pause of the configured partner: %d, want 200", got)
	}
	a.do(t, "GET", "/v1/stats", operatorToken, "", &report)
	if s := report.Sinks["nosuch"]; s.Configured || s.Pause == nil || !s.Pause.Paused() || !s.Pause.UntilResumed {
		t.Fatalf("stats of the phantom: %+v, want it listed, not configured, paused until resumed", s)
	}
	if s := report.Sinks["partner"]; s.Pause == nil || !s.Pause.Paused() || s.Pause.UntilResumed {
		t.Fatalf("stats of partner: %+v, want its pause for a minute", s)
	}
	if got := a.do(t, "DELETE", "/v1/sinks/partner/pause", operatorToken, `{}`, nil); got != http.StatusConflict {
		t.Errorf("forget the configured partner: %d, want 409", got)
	}
	var forgot map[string]any
	if got := a.do(t, "DELETE", "/v1/sinks/nosuch/pause", operatorToken, `{}`, &forgot); got != http.StatusOK || forgot["was_paused"] != true {
		t.Fatalf("forget nosuch: %d %v, want 200, was paused", got, forgot)
	}
	if got := a.do(t, "DELETE", "/v1/sinks/nosuch/pause", operatorToken, `{}`, nil); got != http.StatusNotFound {
		t.Errorf("forget nosuch again: %d, want 404", got)
	}
	report = StatsReport{}
	a.do(t, "GET", "/v1/stats", operatorToken, "", &report)
	if _, listed := report.Sinks["nosuch"]; listed {
		t.Errorf("nosuch still in the stats after forget: %+v", report.Sinks["nosuch"])
	}
	if got := a.do(t, "POST", "/v1/sinks/partner/resume", operatorToken, `{"force": true}`, nil); got != http.StatusUnprocessableEntity {
		t.Errorf("resume with force: %d, want 422", got)
	}
}

// GET /v1/stats is served from the cluster's stats snapshot, not counted
// over the whole table: delivered history (a row sent two hours ago) is
// not read, and the report says when and by whom the counts were taken.
// (Mutation: Stats counting with Operator.Stats, the GROUP BY over every
// row, fails this test: the old sent row is counted and there is no
// taken_at.)
func TestStatsAreServedFromTheSnapshot(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, operatorConfig)
	a.exec(t, `INSERT INTO {schema}.messages (sink, dedup_key, payload, status, sent_at, updated_at)
		VALUES ('partner', 'old', '{}', 'sent', now() - interval '2 hours', now() - interval '2 hours'),
		       ('partner', 'new', '{}', 'pending', NULL, now())`)
	var report struct {
		Sinks   map[string]map[string]any `json:"sinks"`
		TakenAt time.Time                 `json:"taken_at"`
		TakenBy string                    `json:"taken_by"`
	}
	if code := a.do(t, "GET", "/v1/stats", operatorToken, "", &report); code != http.StatusOK {
		t.Fatalf("GET /v1/stats: %d", code)
	}
	p := report.Sinks["partner"]
	if p["pending"] != 1.0 || p["sent_last_hour"] != 0.0 || p["sent"] != nil || report.TakenAt.IsZero() || report.TakenBy != "api" {
		t.Fatalf("stats: %+v; want 1 pending, no sent row of the last hour, no all-time sent count, a snapshot taken by the api", report)
	}
}
