package brokertest

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testenv"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// natsServerBinary is where Debian's nats-server package installs it.
const natsServerBinary = "/usr/sbin/nats-server"

// natsStartTimeout bounds a private nats-server's start.
const natsStartTimeout = 20 * time.Second

// NATSServer is a private nats-server with JetStream on a free port, for
// tests that take the broker away. Its store survives Stop and Start.
type NATSServer struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// NewNATSServer prepares a private server without starting it, so a test
// can point a sink at it while it is down. It is stopped when the test
// ends.
func NewNATSServer(t testing.TB) *NATSServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = natsServerBinary
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.SkipOrFail(t, "nats-server is not installed ("+err.Error()+"); apt-get install nats-server (.ci/run installs it)")
	}
	s := &NATSServer{t: t, bin: bin, port: proc.FreePort(t), dir: t.TempDir()}
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's nats:// URL.
func (s *NATSServer) URL() string { return "nats://" + s.addr() }

func (s *NATSServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start runs the server and waits until it accepts connections.
func (s *NATSServer) Start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	// Polls: nats-server is another process.
	testrelay.WaitFor(s.t, natsStartTimeout, "the private nats-server to listen", func() bool {
		c, err := net.DialTimeout("tcp", s.addr(), dialTimeout)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
}

// Stop kills the server (SIGKILL: a broker that goes away without a
// goodbye) and waits for it to exit.
func (s *NATSServer) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
