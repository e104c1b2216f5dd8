package sinktest

import (
	"net"
	"sync"
	"testing"
)

// SilentAddr returns the host:port of a TCP listener on 127.0.0.1 that
// accepts connections and never answers, nor reads what it is sent: a
// destination that hangs, for Harness.Hang, whatever its protocol. The
// listener and its connections close when t ends.
func SilentAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sinktest: listen: %v", err)
	}
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool // a connection accepted as the test ends is closed at once
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			mu.Lock()
			if closed {
				_ = c.Close()
			} else {
				conns = append(conns, c)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		closed = true
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
