package client_test

// The client against a real coord cluster in the test's process
// (internal/testcluster: real servers, raft between them on an in-memory
// network, the client over loopback TCP).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"coord/client"
	"coord/internal/testcluster"
	"coord/vocab"
)

func realConnect(t *testing.T, addrs []string, opts ...client.Option) (*client.Conn, <-chan client.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, events, err := client.Connect(ctx, addrs, append([]client.Option{client.WithSessionTimeout(4 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c, events
}

func waitEvent(t *testing.T, ch <-chan client.Event, match func(client.Event) bool) client.Event {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("channel closed")
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("timed out waiting for an event")
		}
	}
}

func TestAgainstRealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server cluster")
	}
	tc := testcluster.New(t, 3, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, events := realConnect(t, tc.Addrs())
	other, _ := realConnect(t, tc.Addrs())

	// Calls and error mapping.
	if _, err := c.Create(ctx, "/app", []byte("v0"), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/app", nil, vocab.ModePersistent, vocab.OpenACLUnsafe); !errors.Is(err, vocab.NodeExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := c.Set(ctx, "/app", nil, 9); !errors.Is(err, vocab.BadVersion) {
		t.Fatalf("set with a bad version: %v", err)
	}
	if ok, _, err := c.Exists(ctx, "/nope"); ok || err != nil {
		t.Fatalf("exists on a missing node: %v %v", ok, err)
	}
	eph, err := c.Create(ctx, "/app/e-", nil, vocab.ModeEphemeralSequential, vocab.OpenACLUnsafe)
	if err != nil || eph != "/app/e-0000000000" {
		t.Fatalf("ephemeral sequential: %q %v", eph, err)
	}
	res, err := c.Multi(ctx, client.CheckOp{Path: "/app", Version: 0}, client.DeleteOp{Path: "/nope", Version: -1})
	if !errors.Is(err, vocab.NoNode) || len(res) != 2 || res[0].Err != nil || !errors.Is(res[1].Err, vocab.NoNode) {
		t.Fatalf("failing multi: %+v %v", res, err)
	}

	// Pipelined writes from many goroutines, each in its own order.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			p := fmt.Sprintf("/app/g%d", g)
			if _, err := c.Create(ctx, p, nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
				t.Error(err)
				return
			}
			for i := range 20 {
				if st, err := c.Set(ctx, p, []byte{byte(i)}, int32(i)); err != nil || st.Version != int32(i+1) {
					t.Errorf("%s set %d: %+v %v", p, i, st, err)
					return
				}
			}
		})
	}
	wg.Wait()

	// A watch event arrives before the response of the write that fired it.
	_, _, w, err := c.GetW(ctx, "/app")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/app", []byte("v1"), client.AnyVersion); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w:
		if ev.Type != vocab.EventNodeDataChanged || ev.Path != "/app" {
			t.Fatalf("watch event %v", ev)
		}
	default:
		t.Fatal("set returned before its watch event")
	}

	// Failover: stop the server the session is on; the session, its
	// ephemeral and its watches move to another server.
	_, _, w, err = c.GetW(ctx, "/app")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.AddWatch(ctx, "/app", true)
	if err != nil {
		t.Fatal(err)
	}
	id, was := c.SessionID(), c.Server()
	for _, s := range tc.Servers {
		if s.GRPCAddr() == was {
			s.Close()
		}
	}
	waitEvent(t, events, func(ev client.Event) bool { return ev.State == client.StateDisconnected })
	ev := waitEvent(t, events, func(ev client.Event) bool { return ev.State == client.StateConnected })
	if ev.Server == was || c.SessionID() != id {
		t.Fatalf("re-attached to %s (was %s), session %#x (was %#x)", ev.Server, was, c.SessionID(), id)
	}
	retryUntil := time.Now().Add(30 * time.Second)
	for { // other may have been on the stopped server too
		_, err := other.Set(ctx, "/app", []byte("v2"), client.AnyVersion)
		if err == nil {
			break
		}
		if !errors.Is(err, vocab.ConnectionLoss) || time.Now().After(retryUntil) {
			t.Fatal(err)
		}
	}
	if ev := waitEvent(t, w, func(client.Event) bool { return true }); ev.Type != vocab.EventNodeDataChanged {
		t.Fatalf("one-shot watch after failover: %v", ev)
	}
	if ev := waitEvent(t, rec, func(ev client.Event) bool { return ev.Type != client.EventSession }); ev.Type != vocab.EventNodeDataChanged {
		t.Fatalf("recursive watch after failover: %v", ev)
	}
	if ok, st, err := other.Exists(ctx, eph); !ok || err != nil || st.EphemeralOwner != id {
		t.Fatalf("ephemeral after failover: %v %+v %v", ok, st, err)
	}

	// Close deletes the session's ephemerals.
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := other.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := other.Exists(ctx, eph); ok || err != nil {
		t.Fatalf("ephemeral after Close: %v %v", ok, err)
	}
}

// A server cut off from the quorum drops the session's stream within a
// third of its timeout (issue 13): the client reports Disconnected with the
// reason, re-attaches to another server and keeps its session and its
// ephemeral node.
func TestIsolatedServerHandsTheSessionOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server cluster")
	}
	tc := testcluster.New(t, 3, 0, nil)
	victim := (tc.Leader() + 1) % 3
	addrs := []string{tc.Servers[victim].GRPCAddr(), tc.Servers[(victim+1)%3].GRPCAddr(), tc.Servers[(victim+2)%3].GRPCAddr()}
	c, events := realConnect(t, addrs, client.WithSessionTimeout(3*time.Second), client.WithShuffle(false))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.Server() != addrs[0] {
		t.Fatalf("the client attached to %s, not to the first server %s", c.Server(), addrs[0])
	}
	if _, err := c.Create(ctx, "/lock", nil, vocab.ModeEphemeral, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	id := c.SessionID()
	isolated := time.Now()
	tc.Isolate(victim)
	defer tc.Heal()
	ev := waitEvent(t, events, func(e client.Event) bool { return e.Type == client.EventSession && e.State == client.StateDisconnected })
	if ev.Err == nil || !strings.Contains(ev.Err.Error(), "no contact with a leader") {
		t.Errorf("Disconnected event: %v, want the lost leader as its reason", ev)
	}
	if d := time.Since(isolated); d > 2*time.Second {
		t.Errorf("disconnected %v after the isolation; the bound is 1 s", d)
	}
	ev = waitEvent(t, events, func(e client.Event) bool { return e.Type == client.EventSession && e.State == client.StateConnected })
	if ev.Server == addrs[0] || c.SessionID() != id {
		t.Fatalf("re-attached to %s as session 0x%x, want another server and session 0x%x", ev.Server, c.SessionID(), id)
	}
	ok, st, err := c.Exists(ctx, "/lock")
	if err != nil || !ok || st.EphemeralOwner != id {
		t.Fatalf("the ephemeral after re-attaching: %v %v %v", ok, st, err)
	}
}
