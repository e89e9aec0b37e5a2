package replica

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A heartbeat being handled when the replica closes holds the close until it
// is done (its stores are still open), and one arriving after is not handed
// to raft at all: raft handles heartbeats on the transport's goroutine, which
// raft.Shutdown does not wait for.
func TestHeartbeatGateHoldsCloseUntilHandled(t *testing.T) {
	newTransport := func() *raft.NetworkTransport {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 2*time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	gate := &heartbeatGate{NetworkTransport: newTransport()}
	defer gate.Close()
	sender := newTransport()
	defer sender.Close()

	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	gate.SetHeartbeatHandler(func(rpc raft.RPC) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
	})
	heartbeat := func() error {
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{Addr: []byte(sender.LocalAddr())},
			Term:      1,
		}
		return sender.AppendEntries("s1", gate.LocalAddr(), req, &raft.AppendEntriesResponse{})
	}

	first := make(chan error, 1)
	go func() { first <- heartbeat() }()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat never reached the handler")
	}
	shut := make(chan struct{})
	go func() { gate.shut(); close(shut) }()
	select {
	case <-shut:
		t.Fatal("shut returned while a heartbeat was still being handled")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case <-shut:
	case <-time.After(5 * time.Second):
		t.Fatal("shut did not return once the heartbeat was handled")
	}
	if err := <-first; err != nil {
		t.Fatalf("the heartbeat handled before the close: %v", err)
	}

	// After shut: not handed to the handler; the transport's close ends the
	// sender's wait.
	second := make(chan error, 1)
	go func() { second <- heartbeat() }()
	time.Sleep(200 * time.Millisecond)
	gate.Close()
	select {
	case err := <-second:
		if err == nil {
			t.Fatal("a heartbeat after the close was answered")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sender still waits after the transport closed")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (none after shut)", n)
	}
}
