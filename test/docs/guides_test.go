// Package docs_test runs the guides in docs/ as a newcomer would: every
// fenced `sh` block of a guide, in order, in one shell, and every
// `yaml plugins.yaml` block written to plugins.yaml and checked with
// `outboxd config check` where it appears. A guide whose commands fail, or
// whose configuration does not validate, fails its test.
//
// The commands run in a temporary directory that looks like a checkout
// (symbolic links to the repository's files), with outboxd on PATH, the
// test database in DATABASE_URL, a schema of their own, and every
// well-known port (8080, 1025, 16686, ...) replaced by a free one, in the
// blocks and in the tools' configuration alike, so a developer's own
// services do not get in the way.
package docs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// guideTimeout bounds one guide's commands (a cold build of a tool is the
// slow part; CI builds the tools before the tests).
const guideTimeout = 2 * time.Minute

// wellKnownPorts are the ports the guides and the tools' default
// configuration use; each is replaced by a free port in a test run.
var wellKnownPorts = []int{8080, 8090, 1025, 8025, 4317, 4318, 16685, 16686, 13133}

// filesWithPorts are the repository files the guides' commands read that
// name well-known ports; the test's checkout gets port-replaced copies.
var filesWithPorts = []string{"scripts/tools.sh", "tools/jaeger/config.yaml"}

// guideSecrets stand in for the secrets a reader keeps in the environment.
var guideSecrets = []string{
	"SLACK_BOT_TOKEN=xoxb-docs-test-token",
	"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T000/B000/docs-test",
	"SMTP_PASSWORD=docs-test-password",
}

// block is one fenced code block of a guide.
type block struct {
	info, body string
	line       int
}

var fence = regexp.MustCompile("(?ms)^```([^\\n]*)\\n(.*?)^```\\s*$")

func blocks(t *testing.T, guide string) []block {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", guide))
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	for _, m := range fence.FindAllSubmatchIndex(raw, -1) {
		out = append(out, block{
			info: strings.TrimSpace(string(raw[m[2]:m[3]])),
			body: string(raw[m[4]:m[5]]),
			line: bytes.Count(raw[:m[0]], []byte("\n")) + 1,
		})
	}
	return out
}

// script turns a guide's blocks into one bash script.
func script(t *testing.T, guide string, blocks []block) string {
	t.Helper()
	var s strings.Builder
	s.WriteString("set -euo pipefail\n")
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", guide, b.line)
		switch b.info {
		case "sh":
			fmt.Fprintf(&s, "echo '+ block %s' >&2\n%s\n", where, dedent(b.body))
		case "yaml plugins.yaml":
			fmt.Fprintf(&s, "cat > plugins.yaml <<'__PLUGINS_YAML__'\n%s__PLUGINS_YAML__\n", dedent(b.body))
			fmt.Fprintf(&s, "outboxd config check >/dev/null || { echo 'the plugins.yaml of %s does not validate' >&2; exit 1; }\n", where)
		case "sh docker":
			// No Docker engine here: checked by TestGuidesDockerCommands.
		case "yaml", "yml":
			t.Errorf("%s: a yaml block must be a complete plugins.yaml, marked `yaml plugins.yaml`, so that it is checked", where)
		}
	}
	return s.String()
}

// dedent removes the indentation shared by every line (blocks inside list
// items are indented).
func dedent(body string) string {
	lines := strings.Split(body, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

func TestGuides(t *testing.T) {
	bin, err := proc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, guide := range []string{"slack.md", "webhooks.md", "email.md", "tracing.md", "events.md", "destinations.md"} {
		t.Run(guide, func(t *testing.T) {
			t.Parallel()
			runGuide(t, guide, bin)
		})
	}
}

func runGuide(t *testing.T, guide, bin string) {
	bs := blocks(t, guide)
	ports := portReplacer(t)
	body := ports.Replace(script(t, guide, bs))
	dir := checkout(t, ports)

	schema := freshSchema(t)

	// Output goes to a file, not a pipe: the servers the guide leaves
	// running in the background would hold a pipe open.
	logFile, err := os.Create(filepath.Join(t.TempDir(), "guide.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command("bash", "-c", body)
	cmd.Dir = dir
	cmd.Env = append(proc.Environ(guideSecrets...),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DATABASE_URL="+testdb.URL(), "OUTBOXD_DATABASE_SCHEMA="+schema)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A process group of its own, so that the servers the guide starts in
	// the background stop with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	group := -cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(guideTimeout):
		err = fmt.Errorf("still running after %s", guideTimeout)
	}
	_ = syscall.Kill(group, syscall.SIGTERM) // serve drains; the tools stop
	if err != nil {
		_ = syscall.Kill(group, syscall.SIGKILL)
		out, _ := os.ReadFile(logFile.Name())
		t.Fatalf("the commands of docs/%s failed: %v\n%s", guide, err, out)
	}
}

// freshSchema names a schema of the test's own, dropped when it ends.
func freshSchema(t *testing.T) string {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "docs_" + hex.EncodeToString(suffix)
	pool := testdb.Pool(t, 1)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	return schema
}

// portReplacer maps each well-known port, as 127.0.0.1:PORT, to a free one.
func portReplacer(t *testing.T) *strings.Replacer {
	t.Helper()
	var pairs []string
	for _, p := range wellKnownPorts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		free := l.Addr().(*net.TCPAddr).Port
		l.Close()
		pairs = append(pairs, "127.0.0.1:"+strconv.Itoa(p), "127.0.0.1:"+strconv.Itoa(free))
	}
	return strings.NewReplacer(pairs...)
}

// checkout makes a directory that looks like the repository: a symbolic
// link per entry, except filesWithPorts, copied with ports replaced, and
// plugins.yaml, which the guides write.
func checkout(t *testing.T, ports *strings.Replacer) string {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var mirror func(rel string)
	mirror = func(rel string) {
		entries, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			path := filepath.Join(rel, e.Name())
			if path == "plugins.yaml" || path == ".git" {
				continue
			}
			switch {
			case isOrHoldsFileWithPorts(path) && e.IsDir():
				if err := os.MkdirAll(filepath.Join(dir, path), 0o755); err != nil {
					t.Fatal(err)
				}
				mirror(path)
			case isOrHoldsFileWithPorts(path):
				raw, err := os.ReadFile(filepath.Join(root, path))
				if err != nil {
					t.Fatal(err)
				}
				info, _ := e.Info()
				if err := os.WriteFile(filepath.Join(dir, path), []byte(ports.Replace(string(raw))), info.Mode()); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.Symlink(filepath.Join(root, path), filepath.Join(dir, path)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	mirror("")
	return dir
}

func isOrHoldsFileWithPorts(path string) bool {
	for _, f := range filesWithPorts {
		if f == path || strings.HasPrefix(f, path+"/") {
			return true
		}
	}
	return false
}

// TestGuidesDockerCommands checks the `sh docker` blocks, which need a
// Docker engine this machine lacks: each is one `docker run` publishing the
// well-known ports the tested commands of its guide use.
func TestGuidesDockerCommands(t *testing.T) {
	for _, guide := range []string{"email.md", "tracing.md"} {
		var docker, tested []string
		for _, b := range blocks(t, guide) {
			switch b.info {
			case "sh docker":
				docker = append(docker, b.body)
			case "sh", "yaml plugins.yaml":
				tested = append(tested, b.body)
			}
		}
		if len(docker) == 0 {
			t.Errorf("%s: no docker command", guide)
		}
		for _, d := range docker {
			if !strings.HasPrefix(d, "docker run ") || strings.Count(strings.TrimSpace(d), "\n") > 0 {
				t.Errorf("%s: %q is not a one-line docker run", guide, d)
			}
			for _, m := range regexp.MustCompile(`-p (\d+):(\d+)`).FindAllStringSubmatch(d, -1) {
				if m[1] != m[2] {
					t.Errorf("%s: %q maps port %s to %s", guide, d, m[2], m[1])
				}
			}
			for _, p := range wellKnownPorts {
				used := strings.Contains(strings.Join(tested, "\n"), "127.0.0.1:"+strconv.Itoa(p))
				if used && (p == 4318 || p == 16686 || p == 1025 || p == 8025) && !strings.Contains(d, fmt.Sprintf("-p %d:%d", p, p)) {
					t.Errorf("%s: the docker command does not publish port %d, which the guide's commands use", guide, p)
				}
			}
		}
	}
}
