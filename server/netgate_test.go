package server

import (
	"context"
	"net"
	"testing"
	"time"
)

// A gate with a source IP makes its connections from that address, so a
// proxy between the servers can tell them apart (jepsen's proxy mode).
func TestNetGateSourceIP(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	got := make(chan string, 1)
	go func() {
		if c, err := lis.Accept(); err == nil {
			got <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := newNetGate("127.0.0.42", nil).dial(ctx, lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ip := <-got; ip != "127.0.0.42" {
		t.Fatalf("connection came from %s, want 127.0.0.42", ip)
	}
}
