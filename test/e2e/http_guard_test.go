package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	outboxdserver "github.com/outboxd/outboxd/server"
	"github.com/outboxd/outboxd/server/api"
)

// TestHTTPAPIRefusesBrowsersOnOtherSites: with the default loopback listen
// and no token, a page on another site can neither enqueue nor redrive
// (cross-origin requests, bodies that are not application/json), nor read
// anything through a name of its own re-pointed at 127.0.0.1 (a Host that
// is not this server's); a plain JSON client, a same-origin page and the
// names of http.allowed_hosts still work. GET /v1/dlq's limit is capped,
// and a payload the database cannot store is a 422 naming the payload.
// (Mutations: refuseCrossOrigin ignoring CrossOriginProtection's verdict,
// requireJSON passing every body, hostGuard passing every Host, and
// getDeadLetters without MaxDeadLetterLimit each fail this test.)
func TestHTTPAPIRefusesBrowsersOnOtherSites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "  allowed_hosts: [outbox.internal]")
	e.mustRun("migrate")
	// Dead letters to redrive and to list: more than one page's cap.
	if _, err := e.pool.Exec(context.Background(), "INSERT INTO "+e.schema+".messages (sink, dedup_key, payload, status, attempts) "+
		"SELECT 'audit', 'dead-' || g, '{}', 'dead', 1 FROM generate_series(1, $1) g", api.MaxDeadLetterLimit+1); err != nil {
		t.Fatal(err)
	}
	srv := e.serve()
	port := srv.Addr()[strings.LastIndexByte(srv.Addr(), ':')+1:]
	message := func(key string) string { return fmt.Sprintf(`{"sink":"audit","dedup_key":%q,"payload":{"a":1}}`, key) }

	refused := []struct {
		name, method, path, body string
		code                     int // 403 cross-origin, 415 not JSON, 421 not this server's name
		header                   []string
	}{
		{"cross-site text/plain enqueue", "POST", "/v1/messages", message("evil-1"), 403, []string{"Origin", "https://evil.example", "Content-Type", "text/plain"}},
		{"cross-site JSON enqueue", "POST", "/v1/messages", message("evil-2"), 403, []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}},
		{"cross-site enqueue, old browser", "POST", "/v1/messages", message("evil-3"), 403, []string{"Origin", "https://evil.example"}},
		{"text/plain enqueue", "POST", "/v1/messages", message("evil-4"), 415, []string{"Content-Type", "text/plain"}},
		{"form enqueue", "POST", "/v1/messages", message("evil-5"), 415, []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"enqueue without a content type", "POST", "/v1/messages", message("evil-6"), 415, []string{"Content-Type", ""}},
		{"JSON in another charset", "POST", "/v1/messages", message("evil-7"), 415, []string{"Content-Type", "application/json; charset=latin1"}},
		{"cross-site text/plain redrive", "POST", "/v1/dlq/redrive", `{"all":true}`, 403, []string{"Origin", "https://evil.example", "Content-Type", "text/plain"}},
		{"rebound enqueue", "POST", "/v1/messages", message("evil-8"), 421, []string{"Host", "evil.example:" + port}},
		{"rebound dead letters", "GET", "/v1/dlq", "", 421, []string{"Host", "evil.example"}},
		{"rebound stats", "GET", "/v1/stats", "", 421, []string{"Host", "evil.example:" + port}},
		{"rebound metrics", "GET", "/metrics", "", 421, []string{"Host", "127.0.0.1.evil.example:" + port}},
	}
	for _, r := range refused {
		if code, body := call(t, r.method, srv.url(r.path), "", r.body, r.header...); code != r.code || body["error"] == nil {
			t.Errorf("%s: %d %v, want %d with an error", r.name, code, body, r.code)
		}
	}
	if rows := e.rowCount(); rows != api.MaxDeadLetterLimit+1 {
		t.Errorf("refused requests changed the table: %d rows", rows)
	}
	if s := e.stats()["audit"]; s["dead"] != api.MaxDeadLetterLimit+1 {
		t.Errorf("a refused redrive redrove: %v", s)
	}

	accepted := []struct {
		name   string
		header []string
	}{
		{"plain JSON client", nil},
		{"same-origin page", []string{"Origin", "http://" + srv.Addr(), "Sec-Fetch-Site", "same-origin"}},
		{"localhost", []string{"Host", "localhost:" + port}},
		{"IPv6 loopback", []string{"Host", "[::1]:" + port}},
		{"allowed host", []string{"Host", "Outbox.Internal"}},
		{"JSON in UTF-8", []string{"Content-Type", "application/json; charset=UTF-8"}},
	}
	for i, a := range accepted {
		if code, body := call(t, "POST", srv.url("/v1/messages"), "", message(fmt.Sprint("ok-", i)), a.header...); code != http.StatusCreated {
			t.Errorf("%s: %d %v, want 201", a.name, code, body)
		}
	}
	if rows := e.rowCount(); rows != api.MaxDeadLetterLimit+1+len(accepted) {
		t.Errorf("%d rows after %d accepted enqueues", rows, len(accepted))
	}

	code, body := call(t, "POST", srv.url("/v1/messages"), "", `{"sink":"audit","dedup_key":"nul","payload":{"a":"\u0000"}}`)
	if msg, _ := body["error"].(string); code != http.StatusUnprocessableEntity || !strings.Contains(msg, "payload: ") {
		t.Errorf("payload with \\u0000: %d %v, want 422 naming the payload", code, body)
	}

	resp, err := http.Get(srv.url("/v1/dlq?limit=100000"))
	if err != nil {
		t.Fatal(err)
	}
	var letters []json.RawMessage
	err = json.NewDecoder(resp.Body).Decode(&letters)
	resp.Body.Close()
	if err != nil || len(letters) != api.MaxDeadLetterLimit {
		t.Errorf("GET /v1/dlq?limit=100000: %d dead letters (%v), want the cap of %d", len(letters), err, api.MaxDeadLetterLimit)
	}
}

// TestHTTPMetricsBoundedWhateverClientsSend: requests with ever new Host
// ports and loopback addresses, paths and methods add no series to
// /metrics, and no label carries what a client sent.
// (Mutation: the meter provider without the boundedHTTPServerMetrics view
// fails this test.)
func TestHTTPMetricsBoundedWhateverClientsSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "")
	e.mustRun("migrate")
	srv := e.serve()
	port := srv.Addr()[strings.LastIndexByte(srv.Addr(), ':')+1:]
	send := func(round int) {
		for i := range 50 {
			host := fmt.Sprintf("127.%d.%d.%d:%d", round, i/256, i%256+1, 1024+round*100+i)
			if i%2 == 1 {
				host = fmt.Sprintf("localhost:%d", 20000+round*100+i)
			}
			method := []string{"GET", "POST", fmt.Sprintf("M%dX%d", round, i)}[i%3]
			path := []string{"/v1/stats", "/v1/messages", fmt.Sprintf("/v1/nope-%d-%d", round, i)}[i%3]
			call(t, method, srv.url(path), "", `{}`, "Host", host)
		}
	}
	seriesAfter := func(round int) []string {
		send(round)
		resp, err := http.Get(srv.url("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var series []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "http_server_") {
				series = append(series, sc.Text())
			}
		}
		return series
	}
	first := seriesAfter(1)
	second := seriesAfter(2)
	if len(first) == 0 {
		t.Fatal("no http_server_ series on /metrics")
	}
	if len(second) != len(first) {
		t.Errorf("/metrics grew from %d to %d http_server_ lines with new hosts, paths and methods", len(first), len(second))
	}
	for _, line := range second {
		for _, sent := range []string{"server_address", "server_port", "nope-", "M2X", "127.2.", ":" + port} {
			if strings.Contains(line, sent) {
				t.Fatalf("a metric label carries what a client sent (%q):\n%s", sent, line)
			}
		}
	}
}

// TestHTTPServerCutsOffSlowClients: a client trickling its request body a
// byte a second (a slowloris) is cut off by outboxdserver.ReadTimeout instead of
// holding its connection, and what it sent is not stored.
// (Mutation: the server without ReadTimeout fails this test.)
func TestHTTPServerCutsOffSlowClients(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "")
	e.mustRun("migrate")
	srv := e.serve()
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"sink":"audit","dedup_key":"slow","payload":1}` + strings.Repeat(" ", 200)
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", srv.Addr(), len(body)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes the connection
	}()
	deadline := time.After(outboxdserver.ReadTimeout + 10*time.Second)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-closed:
			if held := time.Since(start); held < outboxdserver.ReadTimeout-time.Second {
				t.Errorf("connection closed after %s, before the read timeout of %s", held, outboxdserver.ReadTimeout)
			}
			if rows := e.rowCount(); rows != 0 {
				t.Errorf("the slow request stored %d rows", rows)
			}
			return
		case <-deadline:
			t.Fatalf("a client sending a byte a second still held its connection after %s", time.Since(start).Round(time.Second))
		case <-tick.C:
			_, _ = conn.Write([]byte{body[i%len(body)]})
		}
	}
}
