package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"coord/api"
	"coord/vocab"
)

func TestCallsAndErrorMapping(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr})
	ctx := ctxT(t)

	p, st, err := c.Create2(ctx, "/a", []byte("x"), vocab.ModePersistent, vocab.OpenACLUnsafe)
	if err != nil || p != "/a" || st.Czxid == 0 || st.DataLength != 1 {
		t.Fatalf("Create2 = %q %+v %v", p, st, err)
	}
	_, err = c.Create(ctx, "/a", nil, vocab.ModePersistent, vocab.OpenACLUnsafe)
	var fe *vocab.Error
	if !errors.Is(err, vocab.NodeExists) || !errors.As(err, &fe) || fe.Op != "create" || fe.Path != "/a" {
		t.Fatalf("Create twice: %v (%#v)", err, fe)
	}
	if _, _, err := c.Get(ctx, "/missing"); !errors.Is(err, vocab.NoNode) {
		t.Fatalf("Get missing: %v", err)
	}
	if _, err := c.Set(ctx, "/a", []byte("y"), 7); !errors.Is(err, vocab.BadVersion) {
		t.Fatalf("Set bad version: %v", err)
	}
	st, err = c.Set(ctx, "/a", []byte("y"), 0)
	if err != nil || st.Version != 1 {
		t.Fatalf("Set = %+v %v", st, err)
	}
	data, st, err := c.Get(ctx, "/a")
	if err != nil || string(data) != "y" || st.Version != 1 {
		t.Fatalf("Get = %q %+v %v", data, st, err)
	}

	// Null data and empty data stay apart.
	if _, err := c.Create(ctx, "/null", nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/empty", []byte{}, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	if d, _, _ := c.Get(ctx, "/null"); d != nil {
		t.Fatalf("null data read back as %#v", d)
	}
	if d, _, _ := c.Get(ctx, "/empty"); d == nil || len(d) != 0 {
		t.Fatalf("empty data read back as %#v", d)
	}

	ok, _, err := c.Exists(ctx, "/missing")
	if ok || err != nil {
		t.Fatalf("Exists missing = %v %v", ok, err)
	}
	ok, st, err = c.Exists(ctx, "/a")
	if !ok || err != nil || st.Version != 1 {
		t.Fatalf("Exists = %v %+v %v", ok, st, err)
	}

	seq, err := c.Create(ctx, "/a/s-", nil, vocab.ModeEphemeralSequential, vocab.OpenACLUnsafe)
	if err != nil || seq != "/a/s-0000000000" {
		t.Fatalf("sequential create = %q %v", seq, err)
	}
	kids, _, err := c.Children(ctx, "/a")
	if err != nil || !slices.Equal(kids, []string{"s-0000000000"}) {
		t.Fatalf("Children = %v %v", kids, err)
	}
	if eph, err := c.GetEphemerals(ctx, "/"); err != nil || !slices.Equal(eph, []string{seq}) {
		t.Fatalf("GetEphemerals = %v %v", eph, err)
	}
	if n, err := c.GetAllChildrenNumber(ctx, "/a"); err != nil || n != 1 {
		t.Fatalf("GetAllChildrenNumber = %d %v", n, err)
	}
	if err := c.Delete(ctx, "/a", AnyVersion); !errors.Is(err, vocab.NotEmpty) {
		t.Fatalf("Delete non-empty: %v", err)
	}
	acl := []vocab.ACL{{Perms: vocab.PermRead | vocab.PermAdmin, ID: vocab.Id{Scheme: "digest", ID: "bob:hash"}}}
	if st, err := c.SetACL(ctx, "/a", acl, 0); err != nil || st.Aversion != 1 {
		t.Fatalf("SetACL = %+v %v", st, err)
	}
	if _, err := c.SetACL(ctx, "/a", acl, 0); !errors.Is(err, vocab.BadVersion) {
		t.Fatalf("SetACL with a stale aversion: %v", err)
	}
	if got, st, err := c.GetACL(ctx, "/a"); err != nil || !slices.Equal(got, acl) || st.Aversion != 1 {
		t.Fatalf("GetACL = %v %+v %v", got, st, err)
	}
	if _, _, err := c.CreateTTL(ctx, "/ttl", nil, vocab.ModePersistentTTL, vocab.OpenACLUnsafe, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if reqs, _ := f.received(); reqs[len(reqs)-1].GetCreate().GetTtl() != 1500 {
		t.Fatalf("CreateTTL sent %v", reqs[len(reqs)-1])
	}
	if p, err := c.Sync(ctx, "/a"); err != nil || p != "/a" {
		t.Fatalf("Sync = %q %v", p, err)
	}
	if c.LastZxid() == 0 {
		t.Fatal("LastZxid not taken from responses")
	}
	if err := c.RemoveWatches(ctx, "/a", vocab.WatcherAny); !errors.Is(err, vocab.NoWatcher) {
		t.Fatalf("RemoveWatches without watches: %v", err)
	}
}

func TestMulti(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr})
	ctx := ctxT(t)

	res, err := c.Multi(ctx,
		CreateOp{Path: "/m", Data: []byte("1"), ACL: vocab.OpenACLUnsafe},
		SetDataOp{Path: "/m", Data: []byte("2"), Version: 0},
		CheckOp{Path: "/m", Version: 1},
	)
	if err != nil || len(res) != 3 || res[0].Path != "/m" || res[1].Stat.Version != 1 {
		t.Fatalf("Multi = %+v %v", res, err)
	}
	res, err = c.Multi(ctx,
		SetDataOp{Path: "/m", Data: []byte("3"), Version: AnyVersion},
		DeleteOp{Path: "/m", Version: 5},
		CreateOp{Path: "/n", ACL: vocab.OpenACLUnsafe},
	)
	var fe *vocab.Error
	if !errors.Is(err, vocab.BadVersion) || !errors.As(err, &fe) || fe.Path != "/m" || fe.Op != "multi" {
		t.Fatalf("failing Multi err = %v", err)
	}
	if len(res) != 3 || res[0].Err != nil || !errors.Is(res[1].Err, vocab.BadVersion) || !errors.Is(res[2].Err, vocab.RuntimeInconsistency) {
		t.Fatalf("failing Multi results = %+v", res)
	}
	if d, _, _ := c.Get(ctx, "/m"); string(d) != "2" {
		t.Fatalf("failed Multi changed data to %q", d)
	}

	rr, err := c.MultiRead(ctx, GetDataOp("/m"), GetChildrenOp("/"), GetDataOp("/nope"))
	if err != nil || len(rr) != 3 {
		t.Fatalf("MultiRead = %+v %v", rr, err)
	}
	if string(rr[0].Data) != "2" || !slices.Contains(rr[1].Children, "m") || !errors.Is(rr[2].Err, vocab.NoNode) {
		t.Fatalf("MultiRead results = %+v", rr)
	}
}

// Requests from many goroutines are all outstanding at once on the one
// stream, go out with increasing xids, and each gets its own response.
func TestPipelinedRequestsMatchByXid(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr})
	ctx := ctxT(t)
	const n = 16
	for i := range n {
		if _, err := c.Create(ctx, fmt.Sprintf("/p%d", i), []byte(fmt.Sprint(i)), vocab.ModePersistent, nil); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := f.received()
	f.hold()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			d, _, err := c.Get(ctx, fmt.Sprintf("/p%d", i))
			if err == nil && string(d) != fmt.Sprint(i) {
				err = fmt.Errorf("Get /p%d got %q: responses mismatched", i, d)
			}
			errs <- err
		})
	}
	// Every request reaches the server before any response leaves it.
	waitFor(t, "all requests pipelined", func() bool { r, _ := f.received(); return len(r) >= len(before)+n })
	f.release(f.lastStream())
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	reqs, _ := f.received()
	for i := 1; i < len(reqs); i++ {
		if reqs[i].GetXid() <= reqs[i-1].GetXid() {
			t.Fatalf("xid %d sent after %d", reqs[i].GetXid(), reqs[i-1].GetXid())
		}
	}
}

// One goroutine's writes take effect in the order it made them, with many
// goroutines interleaving on the session.
func TestFIFOPerSession(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			p := fmt.Sprintf("/g%d", g)
			if _, err := c.Create(ctx, p, nil, vocab.ModePersistent, nil); err != nil {
				t.Error(err)
				return
			}
			for i := range 30 {
				st, err := c.Set(ctx, p, []byte(fmt.Sprint(i)), int32(i))
				if err != nil || st.Version != int32(i+1) {
					t.Errorf("%s set %d: %+v %v", p, i, st, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestResponseWithWrongXidDropsStream(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, events := dial(t, []string{f.addr})
	ctx := ctxT(t)
	id := c.SessionID()
	f.setHook(func(s *fakeStream, req *api.Request) bool {
		if req.GetSync() == nil {
			return false
		}
		s.send(&api.ServerMessage{Msg: &api.ServerMessage_Response{Response: &api.Response{Xid: req.GetXid() + 100}}})
		return true
	})
	if _, err := c.Sync(ctx, "/"); !errors.Is(err, vocab.ConnectionLoss) {
		t.Fatalf("Sync with a wrong xid answer: %v", err)
	}
	waitState(t, events, StateDisconnected)
	waitState(t, events, StateConnected)
	f.setHook(nil)
	if _, _, err := c.Exists(ctx, "/"); err != nil {
		t.Fatalf("after re-attach: %v", err)
	}
	if cr := f.lastConnect(); f.numConnects() != 2 || cr.GetSessionId() != id {
		t.Fatalf("re-attach: %d connects, last %+v", f.numConnects(), cr)
	}
}

func TestContextCancellation(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr})
	ctx := ctxT(t)
	if _, err := c.Create(ctx, "/w", []byte("v"), vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}

	// A call whose context is done sends nothing.
	before, _ := f.received()
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.Get(done, "/w"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context: %v", err)
	}

	// A call that gives up waiting returns at its deadline; its late
	// response is matched and dropped, and leaves no watch behind.
	f.hold()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, _, err := c.GetW(short, "/w")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("GetW past its deadline: %v after %v", err, time.Since(start))
	}
	f.release(f.lastStream())
	if d, _, err := c.Get(ctx, "/w"); err != nil || string(d) != "v" {
		t.Fatalf("Get after an abandoned call = %q %v", d, err)
	}
	if c.watches.has("/w", vocab.WatcherAny) {
		t.Fatal("abandoned GetW registered a watch")
	}
	after, _ := f.received()
	if len(after) != len(before)+2 {
		t.Fatalf("server saw %d requests, want %d (the cancelled call must not be sent)", len(after)-len(before), 2)
	}
}

func TestCloseEndsSession(t *testing.T) {
	cl := newFakeCluster()
	f := newFakeServer(t, cl)
	c, events := dial(t, []string{f.addr})
	ctx := ctxT(t)
	if _, err := c.Create(ctx, "/e", nil, vocab.ModeEphemeral, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/p", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	// Closing deletes the ephemeral, which fires its watch; a watch on a
	// node that stays ends with the session.
	_, _, we, err := c.GetW(ctx, "/e")
	if err != nil {
		t.Fatal(err)
	}
	_, _, w, err := c.GetW(ctx, "/p")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	reqs, _ := f.received()
	if reqs[len(reqs)-1].GetClose() == nil {
		t.Fatal("Close did not send closeSession")
	}
	if cl.node("/e") != nil {
		t.Fatal("ephemeral survived Close")
	}
	if c.State() != StateClosed {
		t.Fatalf("state %v after Close", c.State())
	}
	if ev := recv(t, we); ev.Type != vocab.EventNodeDeleted || ev.Path != "/e" {
		t.Fatalf("watch on the ephemeral: %v", ev)
	}
	if ev := recv(t, w); ev.Type != EventNotWatching || ev.State != StateClosed || ev.Path != "/p" {
		t.Fatalf("watch after Close: %v", ev)
	}
	closed(t, w)
	if ev := waitState(t, events, StateClosed); !errors.Is(ev.Err, ErrClosed) {
		t.Fatalf("closed event: %v", ev)
	}
	closed(t, events)
	if _, _, err := c.Get(ctx, "/"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestAuthIsSentAtConnect(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr}, WithDigestAuth("bob", "secret"))
	if err := c.AddAuth(ctxT(t), "digest", []byte("amy:pw")); err != nil {
		t.Fatal(err)
	}
	auth := f.lastConnect().GetAuth()
	if len(auth) != 1 || auth[0].GetScheme() != "digest" || auth[0].GetId() != "bob:secret" {
		t.Fatalf("connect auth = %v", auth)
	}
	reqs, _ := f.received()
	if a := reqs[len(reqs)-1].GetAuth(); a == nil || !bytes.Equal(a.GetAuth(), []byte("amy:pw")) {
		t.Fatalf("AddAuth sent %v", reqs[len(reqs)-1])
	}
}
