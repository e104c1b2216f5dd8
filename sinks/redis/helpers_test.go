package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/registry"
	redissink "github.com/outboxd/outboxd/sinks/redis"
)

// The binary registers the sink types in sinks/builtin. These tests build
// sinks through the registry, as plugins.yaml does, so they register this
// one.
func init() { registry.Register(redissink.Type) }

// Where the machine's redis-server listens, overridable for other setups.
const (
	redisAddrEnv     = "TEST_REDIS_ADDR"
	defaultRedisAddr = "127.0.0.1:6379"
)

// serverReady bounds the wait for a private redis-server to listen.
const serverReady = 20 * time.Second

// serverAddr returns the host:port of the machine's redis-server, failing
// in CI and skipping elsewhere when it is down.
func serverAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(redisAddrEnv)
	if addr == "" {
		addr = defaultRedisAddr
	}
	brokertest.Require(t, "Redis", addr, "redis-server --daemonize yes --bind 127.0.0.1 --port 6379")
	return addr
}

// serverURL returns the URL of the machine's redis-server (see serverAddr).
func serverURL(t testing.TB) string { return "redis://" + serverAddr(t) + "/0" }

// space is a test's own part of the server: every key it makes starts
// with prefix, and they are deleted when the test ends.
type space struct {
	prefix string
	client *goredis.Client
}

// newSpace returns a key space of a unique prefix on the server at url.
func newSpace(t testing.TB, url string) *space {
	t.Helper()
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	sp := &space{prefix: "outboxd-test:" + rand.Text()[:10] + ":", client: goredis.NewClient(opts)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		keys, err := sp.client.Keys(ctx, sp.prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = sp.client.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Logf("delete the test's keys %s*: %v", sp.prefix, err)
		}
		_ = sp.client.Close()
	})
	return sp
}

// options are the redis sink's options for a stream of the space (a
// template), with the de-duplication keys in the space too.
func (sp *space) options(url, stream string) map[string]any {
	return map[string]any{"url": url, "stream": sp.prefix + stream, "dedup_prefix": sp.prefix + "dedup:"}
}

// entries reads every entry of the space's stream in stream order.
func (sp *space) entries(t testing.TB, stream string) []brokertest.Received {
	t.Helper()
	msgs, err := sp.client.XRange(t.Context(), sp.prefix+stream, "-", "+").Result()
	if err != nil {
		t.Fatalf("XRANGE %s: %v", stream, err)
	}
	out := make([]brokertest.Received, 0, len(msgs))
	for _, m := range msgs {
		str := func(k string) string { s, _ := m.Values[k].(string); return s }
		headers := map[string]string{}
		if err := json.Unmarshal([]byte(str(redissink.FieldHeaders)), &headers); err != nil {
			t.Errorf("entry %s: headers field %q is not a JSON object: %v", m.ID, str(redissink.FieldHeaders), err)
		}
		out = append(out, brokertest.Received{
			ID: str(redissink.FieldID), Dest: stream, Payload: []byte(str(redissink.FieldPayload)), Headers: headers,
		})
	}
	return out
}

// target is the redis sink adding to the space's stream template, read
// from the streams named.
func (sp *space) target(url, template string, streams ...string) brokertest.Target {
	return brokertest.Target{
		Type: redissink.Type.Name, Options: sp.options(url, template),
		Read: func(t testing.TB) []brokertest.Received {
			var all []brokertest.Received
			for _, stream := range streams {
				all = append(all, sp.entries(t, stream)...)
			}
			return all
		},
		Once: true,
	}
}

// build makes a redis sink through the registry, closed when the test ends.
func build(t testing.TB, name string, options map[string]any) sink.Sink {
	t.Helper()
	return brokertest.Target{Type: redissink.Type.Name, Options: options}.Build(t, name)
}

// closedURL is a redis URL of a port nothing listens on.
func closedURL(t testing.TB) string {
	return "redis://127.0.0.1:" + strconv.Itoa(proc.FreePort(t))
}

// privateServer starts a redis-server of the test's own on a free port
// with extra arguments (a maxmemory the shared server must not get),
// killed when the test ends, and returns its URL.
func privateServer(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	port := strconv.Itoa(proc.FreePort(t))
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", port)
	testrelay.WaitFor(t, serverReady, "the private redis-server to listen", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return "redis://" + addr
}

// delivery is a delivery of sink "s" with the payload {"n": n}.
func delivery(key string, n int) *sink.Delivery {
	return &sink.Delivery{Sink: "s", DedupKey: key, Payload: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`), Headers: map[string]string{}}
}
