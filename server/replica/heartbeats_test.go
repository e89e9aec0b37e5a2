package replica

import (
	"errors"
	"io"
	"net"
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

// TestReplicationWaitsForAPeerToComeBack: an AppendEntries with entries to
// a peer that cannot be reached is tried again until the peer answers, so
// raft does not count a failure per try and back off for up to 10 s from a
// follower that restarts; a heartbeat fails at once, as before; the
// replica's closing and a shut transport end the retries.
func TestReplicationWaitsForAPeerToComeBack(t *testing.T) {
	// A real peer that starts listening 700 ms after the first try.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	leader, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	g := &heartbeatGate{NetworkTransport: leader}
	peerUp := make(chan *raft.NetworkTransport, 1)
	time.AfterFunc(700*time.Millisecond, func() {
		tr, err := raft.NewTCPTransport(addr, nil, 2, 2*time.Second, io.Discard)
		if err != nil {
			t.Error(err)
			peerUp <- nil
			return
		}
		peerUp <- tr
		for rpc := range tr.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, LastLog: 7, Success: true}, nil)
		}
	})
	defer func() {
		if tr := <-peerUp; tr != nil {
			tr.Close()
		}
	}()
	args := &raft.AppendEntriesRequest{Term: 1, PrevLogEntry: 6, PrevLogTerm: 1, Entries: []*raft.Log{{Index: 7, Term: 1}}}
	var resp raft.AppendEntriesResponse
	start := time.Now()
	if err := g.AppendEntries("p", raft.ServerAddress(addr), args, &resp); err != nil {
		t.Fatalf("AppendEntries to a peer back after 700 ms: %v (after %v)", err, time.Since(start))
	}
	if !resp.Success || resp.LastLog != 7 {
		t.Fatalf("response %+v", resp)
	}
	if d := time.Since(start); d < 600*time.Millisecond || d > 5*time.Second {
		t.Fatalf("answered after %v", d)
	}

	// Stubbed sends: count the tries.
	var tries atomic.Int32
	unreachable := errors.New("dial tcp: connection refused")
	g.send = func(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error {
		tries.Add(1)
		return unreachable
	}
	if err := g.AppendEntries("p", "x", &raft.AppendEntriesRequest{Term: 1}, &resp); err == nil || tries.Load() != 1 {
		t.Fatalf("heartbeat: err %v after %d tries, want the failure at once", err, tries.Load())
	}
	stop := make(chan struct{})
	g.stop = stop
	tries.Store(0)
	time.AfterFunc(350*time.Millisecond, func() { close(stop) })
	start = time.Now()
	if err := g.AppendEntries("p", "x", args, &resp); err == nil || tries.Load() < 2 || time.Since(start) > 2*time.Second {
		t.Fatalf("closing: err %v after %d tries in %v", err, tries.Load(), time.Since(start))
	}
	g.stop = nil
	tries.Store(0)
	g.send = func(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error {
		tries.Add(1)
		return raft.ErrTransportShutdown
	}
	if err := g.AppendEntries("p", "x", args, &resp); !errors.Is(err, raft.ErrTransportShutdown) || tries.Load() != 1 {
		t.Fatalf("shut transport: err %v after %d tries", err, tries.Load())
	}

	// A step-down ends the retries of the old term: raft has stopped the
	// replication, and its send must not go on for replicateRetry.
	var leading atomic.Bool
	leading.Store(true)
	g.leads = func(term uint64) bool { return leading.Load() && term == 1 }
	g.send = func(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error {
		tries.Add(1)
		return unreachable
	}
	tries.Store(0)
	time.AfterFunc(350*time.Millisecond, func() { leading.Store(false) })
	start = time.Now()
	if err := g.AppendEntries("p", "x", args, &resp); err == nil || tries.Load() < 2 || time.Since(start) > 2*time.Second {
		t.Fatalf("stepped down: err %v after %d tries in %v", err, tries.Load(), time.Since(start))
	}
}
