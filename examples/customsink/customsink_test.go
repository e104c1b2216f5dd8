package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestCustomBuildDeliversThroughFileSink builds this custom outboxd and
// uses it like the stock binary: config check, migrate, enqueue, serve;
// the messages land in the file.
func TestCustomBuildDeliversThroughFileSink(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "custom-outboxd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "customsink_" + hex.EncodeToString(suffix)
	pool := testdb.Pool(t, 1)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })

	archive := filepath.Join(dir, "archive.jsonl")
	config := filepath.Join(dir, "plugins.yaml")
	yaml := fmt.Sprintf("database: {url: %q, schema: %s}\nrelay: {poll_interval: 100ms}\nhttp: {listen: 127.0.0.1:0}\n"+
		"sinks:\n  archive:\n    type: file\n    options: {path: %q}\n", testdb.URL(), schema, archive)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"--config", config}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("config", "check")
	run("migrate")
	for i := range 3 {
		run("enqueue", "--sink", "archive", "--key", fmt.Sprint("k-", i), "--payload", fmt.Sprintf(`{"n":%d}`, i))
	}

	serve := exec.Command(bin, "--config", config, "serve", "--log-format", "json")
	stderr, _ := serve.StderrPipe()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // drain the log so serve never blocks on a full pipe
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
		}
	}()
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		if err := serve.Wait(); err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	}()
	// Polls the file: the relay writing it is `outboxd serve`, another
	// process.
	deadline := time.Now().Add(30 * time.Second)
	var records []Record
	for len(records) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the file holds %d of 3 messages", len(records))
		}
		time.Sleep(100 * time.Millisecond)
		data, _ := os.ReadFile(archive)
		records = records[:0]
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r Record
			if json.Unmarshal([]byte(line), &r) == nil {
				records = append(records, r)
			}
		}
	}
	for _, r := range records {
		if r.Sink != "archive" || !strings.HasPrefix(r.DedupKey, "k-") || r.Attempt != 1 {
			t.Errorf("unexpected record %+v", r)
		}
	}
}

// TestNewFileSinkRejectsBadOptions: registry.Define gives a custom sink the
// checks of the built-in ones, typo suggestions included.
func TestNewFileSinkRejectsBadOptions(t *testing.T) {
	for _, c := range []struct {
		options map[string]any
		want    string
	}{
		{map[string]any{}, "option path: is required"},
		{map[string]any{"path": "/tmp/x", "colour": "red"}, "unknown option colour"},
		{map[string]any{"paht": "/tmp/x"}, "unknown option paht (did you mean path?)"},
		{map[string]any{"path": 42}, "option path: want a string, got a number"},
	} {
		if _, err := FileSinkType.New("archive", c.options, sink.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("options %v: error %v, want one containing %q", c.options, err, c.want)
		}
	}
}

func ExampleFileSink() {
	path := filepath.Join(os.TempDir(), "outboxd-example-archive.jsonl")
	defer os.Remove(path)
	archive, _ := FileSinkType.New("archive", map[string]any{"path": path}, sink.Env{})
	_ = archive.Deliver(context.Background(), &sink.Delivery{ID: 1, Sink: "archive", DedupKey: "k", Attempt: 1, Payload: json.RawMessage(`{"n":1}`)})
	data, _ := os.ReadFile(path)
	fmt.Print(string(data))
	// Output: {"id":1,"sink":"archive","dedup_key":"k","attempt":1,"payload":{"n":1}}
}
