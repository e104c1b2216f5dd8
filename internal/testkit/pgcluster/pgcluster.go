// Package pgcluster runs a throwaway PostgreSQL cluster that a test owns, so
// fault tests can stop and restart the server without disturbing the shared
// one other test packages use.
package pgcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testenv"
)

// BinDirEnv names the environment variable that points at PostgreSQL's
// bin directory (initdb, pg_ctl); DefaultBinDir is used without it.
const BinDirEnv = "OUTBOXD_PG_BIN"

// DefaultBinDir is where Debian installs PostgreSQL 15's server binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// serverUser runs the server when the test runs as root: PostgreSQL
// refuses to run as root.
const serverUser = "postgres"

// startTimeout bounds pg_ctl start, stop and restart.
const startTimeout = 60 * time.Second

// Cluster is a PostgreSQL data directory in a temporary directory, with its
// socket there too, listening on 127.0.0.1 at a free port with trust auth.
type Cluster struct {
	t       testing.TB
	bin     string
	dir     string // the temporary directory holding data/ and the socket
	port    int
	asUser  []string // "runuser -u postgres --" when running as root
	running bool
}

// New initialises a cluster (not started) and removes it when the test
// ends. It skips the test when PostgreSQL's server binaries are missing
// (and fails it in CI: see testenv).
func New(t testing.TB) *Cluster {
	t.Helper()
	bin := os.Getenv(BinDirEnv)
	if bin == "" {
		bin = DefaultBinDir
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		testenv.SkipOrFail(t, fmt.Sprintf("pgcluster: no initdb in %s (set %s): %v", bin, BinDirEnv, err))
	}
	c := &Cluster{t: t, bin: bin, port: proc.FreePort(t)}
	dir, err := os.MkdirTemp("", "outboxd-pgcluster-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(c.remove)
	if os.Geteuid() == 0 {
		u, err := user.Lookup(serverUser)
		if err != nil {
			testenv.SkipOrFail(t, fmt.Sprintf("pgcluster: running as root without a %s user: %v", serverUser, err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.asUser = []string{"runuser", "-u", serverUser, "--"}
	}
	c.run("initdb", "-D", c.dataDir(), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
	conf := fmt.Sprintf(`
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 100
fsync = off
full_page_writes = off
shared_buffers = 32MB
log_min_messages = warning
`, c.port, c.dir)
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(conf); err != nil {
		t.Fatal(err)
	}
	return c
}

// Start initialises a cluster, starts it and returns it.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c := New(t)
	c.Start()
	return c
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// URL is the connection string of the cluster's postgres database.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	c.pgCtl("start", "-l", filepath.Join(c.dir, "server.log"))
	c.running = true
}

// Stop shuts the server down with the fast mode: sessions are
// disconnected, in-flight transactions roll back.
func (c *Cluster) Stop() {
	c.t.Helper()
	c.pgCtl("stop", "-m", "fast")
	c.running = false
}

// Restart is pg_ctl restart -m fast: every connection is cut, and the
// server is back when it returns.
func (c *Cluster) Restart() {
	c.t.Helper()
	c.pgCtl("restart", "-m", "fast", "-l", filepath.Join(c.dir, "server.log"))
	c.running = true
}

// Crash is pg_ctl stop -m immediate: the server processes exit at once,
// as in a crash, and whatever WAL they had not written is lost; Start
// recovers from what was.
func (c *Cluster) Crash() {
	c.t.Helper()
	c.pgCtl("stop", "-m", "immediate")
	c.running = false
}

// Configure appends settings (postgresql.conf lines) to the cluster's
// configuration; they apply from the next Start.
func (c *Cluster) Configure(settings ...string) {
	c.t.Helper()
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	for _, line := range settings {
		if _, err := f.WriteString(line + "\n"); err != nil {
			c.t.Fatal(err)
		}
	}
}

// Pool opens a pool of at most size connections on the cluster, closed
// when the test ends.
func (c *Cluster) Pool(size int32) *pgxpool.Pool {
	c.t.Helper()
	cfg, err := pgxpool.ParseConfig(c.URL())
	if err != nil {
		c.t.Fatal(err)
	}
	cfg.MaxConns = size
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(pool.Close)
	return pool
}

func (c *Cluster) pgCtl(args ...string) {
	c.t.Helper()
	c.run("pg_ctl", append(append([]string{}, args...), "-D", c.dataDir(), "-w", "-t", strconv.Itoa(int(startTimeout.Seconds())))...)
}

func (c *Cluster) run(tool string, args ...string) {
	c.t.Helper()
	argv := append(append(append([]string{}, c.asUser...), filepath.Join(c.bin, tool)), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*startTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		c.t.Fatalf("pgcluster: %s %v: %v\n%s\nserver log:\n%s", tool, args, err, out, log)
	}
}

// remove stops the server if it runs and deletes the directory.
func (c *Cluster) remove() {
	if c.running {
		argv := append(append([]string{}, c.asUser...), filepath.Join(c.bin, "pg_ctl"), "stop", "-m", "immediate", "-D", c.dataDir(), "-w")
		_ = exec.Command(argv[0], argv[1:]...).Run()
	}
	_ = os.RemoveAll(c.dir)
}
