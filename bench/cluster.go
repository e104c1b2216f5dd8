package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"time"
)

// pgBinEnv points at PostgreSQL's server binaries (initdb, pg_ctl) for the
// private cluster; defaultPGBin is where Debian installs PostgreSQL 15's.
const (
	pgBinEnv     = "OUTBOXD_PG_BIN"
	defaultPGBin = "/usr/lib/postgresql/15/bin"
)

// privateMaxConnections is the private cluster's max_connections: the
// idle-connections pressure scenario holds pressureIdleConns connections
// beside the relays, producers and readers, more than a default server's 100.
const privateMaxConnections = 500

// privateClusterStart bounds pg_ctl's start and stop.
const privateClusterStart = 60 * time.Second

// privateConf is appended to the private cluster's postgresql.conf. It is
// production-like on purpose: autovacuum on with its defaults (the shared
// server of the development machines runs without it, which hides the
// bloat and the plans the pressure scenarios are about), durable commits,
// the shared server's memory.
const privateConf = `
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = %d
shared_buffers = 128MB
autovacuum = on
log_min_messages = warning
`

// privateCluster is a PostgreSQL cluster the benchmark creates for its run
// and removes afterwards, so that scenarios which hold transactions open,
// terminate backends or open hundreds of connections never touch a shared
// server (a held XID stops vacuum for every database of its cluster).
type privateCluster struct {
	bin    string
	dir    string
	port   int
	asUser []string // runuser -u postgres --, when the benchmark runs as root
}

// startPrivateCluster initialises and starts a cluster in a temporary
// directory, listening on a free port of 127.0.0.1 with trust auth.
func startPrivateCluster(logf func(string, ...any)) (*privateCluster, error) {
	bin := os.Getenv(pgBinEnv)
	if bin == "" {
		bin = defaultPGBin
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return nil, fmt.Errorf("private cluster: no initdb in %s (set %s): %w", bin, pgBinEnv, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("private cluster: %w", err)
	}
	dir, err := os.MkdirTemp("", "outboxd-bench-pg-")
	if err != nil {
		return nil, fmt.Errorf("private cluster: %w", err)
	}
	c := &privateCluster{bin: bin, dir: dir, port: port}
	if err := c.prepareOwner(); err != nil {
		c.remove()
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := c.tool("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
		c.remove()
		return nil, err
	}
	conf := fmt.Sprintf(privateConf, port, dir, privateMaxConnections)
	if err := appendFile(filepath.Join(data, "postgresql.conf"), conf); err != nil {
		c.remove()
		return nil, fmt.Errorf("private cluster: %w", err)
	}
	if err := c.pgCtl("start", "-l", filepath.Join(dir, "server.log")); err != nil {
		c.remove()
		return nil, err
	}
	logf("private PostgreSQL cluster on port %d (autovacuum on, max_connections %d) in %s", port, privateMaxConnections, dir)
	return c, nil
}

// prepareOwner arranges for the server to run as postgres when the
// benchmark runs as root: PostgreSQL refuses to run as root.
func (c *privateCluster) prepareOwner() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("private cluster: running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(c.dir, uid, gid); err != nil {
		return fmt.Errorf("private cluster: %w", err)
	}
	c.asUser = []string{"runuser", "-u", "postgres", "--"}
	return nil
}

// dataDir is the cluster's data directory.
func (c *privateCluster) dataDir() string { return filepath.Join(c.dir, "data") }

// url is the connection string of the cluster's postgres database.
func (c *privateCluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// stop shuts the server down (fast mode) and removes its directory.
func (c *privateCluster) stop() {
	_ = c.pgCtl("stop", "-m", "fast")
	c.remove()
}

func (c *privateCluster) remove() { _ = os.RemoveAll(c.dir) }

func (c *privateCluster) pgCtl(args ...string) error {
	return c.tool("pg_ctl", append(args, "-D", filepath.Join(c.dir, "data"), "-w",
		"-t", strconv.Itoa(int(privateClusterStart.Seconds())))...)
}

func (c *privateCluster) tool(name string, args ...string) error {
	argv := append(append(append([]string{}, c.asUser...), filepath.Join(c.bin, name)), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*privateClusterStart)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		return fmt.Errorf("private cluster: %s: %w\n%s\n%s", name, err, out, log)
	}
	return nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
