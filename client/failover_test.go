package client

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/vocab"
)

// hangOn makes f swallow sync requests on path (they never get an answer)
// and returns a channel that ends with the error of a Sync sent there.
func hangOn(t *testing.T, f *fakeServer, c *Conn, path string) <-chan error {
	f.setHook(func(_ *fakeStream, req *api.Request) bool { return req.GetSync().GetPath() == path })
	errc := make(chan error, 1)
	go func() {
		_, err := c.Sync(context.Background(), path)
		errc <- err
	}()
	waitFor(t, "the hanging request to arrive", func() bool {
		reqs, _ := f.received()
		return len(reqs) > 0 && reqs[len(reqs)-1].GetSync().GetPath() == path
	})
	return errc
}

func waitErr(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return")
	}
	return nil
}

func TestFailoverCarriesSessionAndWatches(t *testing.T) {
	cl := newFakeCluster()
	a, b := newFakeServer(t, cl), newFakeServer(t, cl)
	var open atomic.Bool
	b.setReject(func(*api.ConnectRequest) error {
		if !open.Load() {
			return status.Error(codes.Unavailable, "behind the client")
		}
		return nil
	})
	c, events := dial(t, []string{a.addr, b.addr})
	ctx := ctxT(t)
	for _, p := range []string{"/d", "/gone", "/p", "/r"} {
		if _, err := c.Create(ctx, p, nil, vocab.ModePersistent, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create(ctx, "/e", nil, vocab.ModeEphemeral, nil); err != nil {
		t.Fatal(err)
	}
	_, _, wd, _ := c.GetW(ctx, "/d")
	_, _, wg, _ := c.GetW(ctx, "/gone")
	_, _, wm, _ := c.ExistsW(ctx, "/missing")
	_, _, wc, _ := c.ChildrenW(ctx, "/p")
	wp, _ := c.AddWatch(ctx, "/p", false)
	wr, err := c.AddWatch(ctx, "/r", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddAuth(ctx, "digest", []byte("amy:pw")); err != nil {
		t.Fatal(err)
	}
	id, lastZxid := c.SessionID(), c.LastZxid()
	password := cl.sessions[id].password
	hung := hangOn(t, a, c, "/hang")

	a.stop()
	if err := waitErr(t, hung); !errors.Is(err, vocab.ConnectionLoss) {
		t.Fatalf("in-flight call on the broken stream: %v", err)
	}
	waitState(t, events, StateDisconnected)
	if ev := recv(t, wp); ev.Type != EventSession || ev.State != StateDisconnected {
		t.Fatalf("persistent watch at disconnect: %v", ev)
	}

	// While no server takes the session: a call waits for one (or gives
	// up with its context), and a watched node goes away.
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, _, err := c.Get(short, "/d"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get while disconnected: %v", err)
	}
	queued := make(chan error, 1)
	go func() { _, _, err := c.Get(ctx, "/d"); queued <- err }()
	cl.mu.Lock()
	cl.zxid++
	cl.remove("/gone")
	cl.mu.Unlock()
	waitFor(t, "b to refuse a connect", func() bool { return b.numConnects() >= 1 })
	open.Store(true)

	if ev := waitState(t, events, StateConnected); ev.Server != b.addr {
		t.Fatalf("re-attached to %q, want %q", ev.Server, b.addr)
	}
	if err := waitErr(t, queued); err != nil {
		t.Fatalf("call made while disconnected: %v", err)
	}
	cr := b.lastConnect()
	if cr.GetSessionId() != id || string(cr.GetPassword()) != string(password) || cr.GetLastZxid() != lastZxid {
		t.Fatalf("re-attach request %v, want session %#x last zxid %d", cr, id, lastZxid)
	}
	ws := cr.GetWatches()
	if ws.GetRelativeZxid() != lastZxid ||
		!slices.Equal(ws.GetData(), []string{"/d", "/gone"}) || !slices.Equal(ws.GetExist(), []string{"/missing"}) ||
		!slices.Equal(ws.GetChild(), []string{"/p"}) || !slices.Equal(ws.GetPersistent(), []string{"/p"}) ||
		!slices.Equal(ws.GetPersistentRecursive(), []string{"/r"}) {
		t.Fatalf("re-registered watches %v", ws)
	}
	if auth := cr.GetAuth(); len(auth) != 1 || auth[0].GetId() != "amy:pw" {
		t.Fatalf("re-attach auth %v", auth)
	}
	if c.SessionID() != id || c.State() != StateConnected || c.Server() != b.addr {
		t.Fatalf("after failover: session %#x state %v server %s", c.SessionID(), c.State(), c.Server())
	}

	// The change made while away fires at once; the others still wait.
	if ev := recv(t, wg); ev.Type != vocab.EventNodeDeleted || ev.Path != "/gone" {
		t.Fatalf("watch on a node deleted while disconnected: %v", ev)
	}
	if ev := recv(t, wp); ev.Type != EventSession || ev.State != StateConnected {
		t.Fatalf("persistent watch at re-attach: %v", ev)
	}
	quiet(t, wd)
	cl.set("/d", []byte("new"))
	if ev := recv(t, wd); ev.Type != vocab.EventNodeDataChanged || ev.Path != "/d" {
		t.Fatalf("data watch through b: %v", ev)
	}
	if _, err := c.Create(ctx, "/missing", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, wm); ev.Type != vocab.EventNodeCreated {
		t.Fatalf("exist watch through b: %v", ev)
	}
	if _, err := c.Create(ctx, "/p/k", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, wc); ev.Type != vocab.EventNodeChildrenChanged {
		t.Fatalf("child watch through b: %v", ev)
	}
	if ev := recv(t, wp); ev.Type != vocab.EventNodeChildrenChanged {
		t.Fatalf("persistent watch through b: %v", ev)
	}
	if _, err := c.Create(ctx, "/r/z", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	for _, st := range []State{StateDisconnected, StateConnected} {
		if ev := recv(t, wr); ev.Type != EventSession || ev.State != st {
			t.Fatalf("recursive watch session event %v, want %v", ev, st)
		}
	}
	if ev := recv(t, wr); ev.Type != vocab.EventNodeCreated || ev.Path != "/r/z" {
		t.Fatalf("recursive watch through b: %v", ev)
	}
	if n := cl.node("/e"); n == nil || n.stat.EphemeralOwner != id {
		t.Fatal("the session's ephemeral did not survive the failover")
	}
}

func TestExpiredByServer(t *testing.T) {
	cl := newFakeCluster()
	f := newFakeServer(t, cl)
	c, events := dial(t, []string{f.addr})
	ctx := ctxT(t)
	if _, err := c.Create(ctx, "/d", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	_, _, w, _ := c.GetW(ctx, "/d")
	wp, err := c.AddWatch(ctx, "/d", true)
	if err != nil {
		t.Fatal(err)
	}
	hung := hangOn(t, f, c, "/hang")

	cl.expire(c.SessionID())
	if err := waitErr(t, hung); !errors.Is(err, vocab.SessionExpired) {
		t.Fatalf("in-flight call at expiry: %v", err)
	}
	for _, ch := range []<-chan Event{w, wp} {
		ev := recv(t, ch)
		if ev.Type != EventNotWatching || ev.State != StateExpired || ev.Path != "/d" || !errors.Is(ev.Err, vocab.SessionExpired) {
			t.Fatalf("watch at expiry: %v", ev)
		}
		closed(t, ch)
	}
	waitState(t, events, StateExpired)
	closed(t, events)
	if c.State() != StateExpired {
		t.Fatalf("state %v", c.State())
	}
	_, _, err = c.Get(ctx, "/d")
	var fe *vocab.Error
	if !errors.Is(err, vocab.SessionExpired) || !errors.As(err, &fe) || fe.Op != "get" {
		t.Fatalf("Get after expiry: %v", err)
	}
	if _, _, w, err := c.GetW(ctx, "/d"); w != nil || !errors.Is(err, vocab.SessionExpired) {
		t.Fatalf("GetW after expiry: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close after expiry: %v", err)
	}
	if f.numConnects() != 1 {
		t.Fatalf("client tried to re-attach an expired session (%d connects)", f.numConnects())
	}
}

func TestExpiredWhenServerDoesNotKnowSession(t *testing.T) {
	cl := newFakeCluster()
	a, b := newFakeServer(t, cl), newFakeServer(t, cl)
	c, events := dial(t, []string{a.addr, b.addr})
	cl.mu.Lock()
	delete(cl.sessions, c.SessionID())
	cl.mu.Unlock()
	a.stop()
	if ev := waitState(t, events, StateExpired); !errors.Is(ev.Err, vocab.SessionExpired) {
		t.Fatalf("expired event: %v", ev)
	}
	if cr := b.lastConnect(); cr.GetSessionId() != c.SessionID() {
		t.Fatalf("b saw %v", cr)
	}
}

// With no server reachable the session is reported expired once its
// timeout has passed, and calls waiting for a server fail with that.
func TestExpiredLocallyAfterTimeout(t *testing.T) {
	cl := newFakeCluster()
	cl.timeoutMs = 300
	f := newFakeServer(t, cl)
	c, events := dial(t, []string{f.addr})
	f.stop()
	stopped := time.Now()
	waitState(t, events, StateDisconnected)
	errc := make(chan error, 1)
	go func() { _, _, err := c.Get(context.Background(), "/"); errc <- err }()
	waitState(t, events, StateExpired)
	if since := time.Since(stopped); since < 150*time.Millisecond {
		t.Fatalf("expired %v after the server went away, before the 300ms timeout could pass", since)
	}
	if err := waitErr(t, errc); !errors.Is(err, vocab.SessionExpired) {
		t.Fatalf("call waiting for a server: %v", err)
	}
}

func TestPingWhenIdle(t *testing.T) {
	cl := newFakeCluster()
	cl.timeoutMs = 300 // negotiated down from the 10s the client asks
	f := newFakeServer(t, cl)
	c, _ := dial(t, []string{f.addr})
	if c.SessionTimeout() != 300*time.Millisecond {
		t.Fatalf("negotiated timeout %v", c.SessionTimeout())
	}
	waitFor(t, "five pings", func() bool {
		reqs, _ := f.received()
		return len(reqs) >= 5
	})
	reqs, times := f.received()
	for i, r := range reqs {
		if r.GetPing() == nil {
			t.Fatalf("request %d of an idle session is %v, want a ping", i, r)
		}
		if i > 0 {
			if gap := times[i].Sub(times[i-1]); gap > 150*time.Millisecond {
				t.Fatalf("%v between pings, want about a third of the 300ms timeout", gap)
			}
		}
	}
}

// A server that stops answering (pings included) is left after two thirds
// of the session timeout, for the next server.
func TestSilentServerIsLeft(t *testing.T) {
	cl := newFakeCluster()
	cl.timeoutMs = 300
	a, b := newFakeServer(t, cl), newFakeServer(t, cl)
	c, events := dial(t, []string{a.addr, b.addr})
	a.setHook(func(*fakeStream, *api.Request) bool { return true })
	waitState(t, events, StateDisconnected)
	if ev := waitState(t, events, StateConnected); ev.Server != b.addr || c.State() != StateConnected {
		t.Fatalf("re-attached to %q (state %v)", ev.Server, c.State())
	}
}

func TestConnectFailures(t *testing.T) {
	ctx := ctxT(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	start := time.Now()
	_, _, err = Connect(ctx, []string{dead}, WithMaxRetries(3), WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("Connect to nothing with 3 retries: %v after %v", err, time.Since(start))
	}

	f := newFakeServer(t, newFakeCluster())
	f.setReject(func(*api.ConnectRequest) error { return status.Error(codes.Unauthenticated, "no") })
	if _, _, err := Connect(ctx, []string{f.addr}); !errors.Is(err, vocab.AuthFailed) {
		t.Fatalf("Connect refused as unauthenticated: %v", err)
	}

	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	f.setReject(func(*api.ConnectRequest) error { <-block; return nil })
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, _, err := Connect(short, []string{f.addr}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect past its deadline: %v", err)
	}
}
