package replica

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"coord/api"
	"coord/fsm"
	"coord/vocab"
)

// heldWatcher is a replica's Observer whose Applied waits while the test
// holds it, so that the test sees the replica between leading and applying.
type heldWatcher struct {
	mu      sync.Mutex
	hold    chan struct{} // non-nil: Applied waits for it to close
	waiting chan struct{} // closed when an Applied first waits on hold
	applied int
}

func (w *heldWatcher) Applied(*fsm.Command, fsm.Result, []fsm.Trigger) {
	w.mu.Lock()
	hold, waiting := w.hold, w.waiting
	if hold != nil && waiting != nil {
		close(waiting)
		w.waiting = nil
	}
	w.applied++
	w.mu.Unlock()
	if hold != nil {
		<-hold
	}
}

func (w *heldWatcher) Restored(*fsm.View) {}

type noServices struct{}

func (noServices) Touch(context.Context, *api.TouchRequest) (*api.TouchResponse, error) {
	return &api.TouchResponse{}, nil
}

func (noServices) Join(context.Context, *api.JoinRequest) (*api.JoinResponse, error) {
	return &api.JoinResponse{}, nil
}

// A restarted leader is not Settled until it has applied the entries its
// earlier terms logged: its state is older than the cluster's until then
// (the leader promoted an observer a reconfig had added, on the
// /zookeeper/config text from before the reconfig, in CI's TestReconfig).
func TestSettledWaitsForEarlierEntries(t *testing.T) {
	logs, stable, snaps := raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	auth, err := KeyAuth(bytes.Repeat([]byte("k"), MinClusterKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	start := func(w *heldWatcher) *Replica {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var d net.Dialer
		r, err := New(Config{ID: "s1", Bootstrap: true, BootstrapPeers: []Member{{ID: "s1", Addr: lis.Addr().String(), Voter: true}},
			RaftTimeout: 100 * time.Millisecond, CommitTimeout: 2 * time.Millisecond, SnapshotInterval: time.Minute, SnapshotThreshold: 1 << 20,
			PeerListener: lis, PeerDial: func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
			PeerAuth: auth, Services: noServices{}, Watcher: w,
			LogStore: logs, StableStore: stable, Snapshots: snaps})
		if err != nil {
			t.Fatal(err)
		}
		r.Start()
		return r
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
		}
	}

	r := start(&heldWatcher{})
	waitFor("first leader", r.IsLeader)
	for _, p := range []string{"/a", "/b", "/c"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := r.Propose(ctx, &fsm.Command{Type: fsm.CmdCreate, Op: fsm.Op{
			Type: fsm.CmdCreate, Path: p, ACL: vocab.OpenACLUnsafe, Mode: vocab.ModePersistent}})
		cancel()
		if err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	waitFor("settled in the first term", r.Settled)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	hold := make(chan struct{})
	w := &heldWatcher{hold: hold, waiting: make(chan struct{})}
	w.mu.Lock()
	waiting := w.waiting
	w.mu.Unlock()
	r = start(w)
	defer r.Close()
	var release sync.Once
	defer release.Do(func() { close(hold) }) // before Close, which waits for apply
	waitFor("leader after the restart", r.IsLeader)
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted leader applied nothing")
	}
	if r.Settled() {
		t.Fatalf("Settled while the first of 3 earlier entries is being applied (applied index %d)", r.Applied())
	}
	release.Do(func() { close(hold) })
	waitFor("settled once applied", r.Settled)
	w.mu.Lock()
	n := w.applied
	w.mu.Unlock()
	if n != 3 {
		t.Errorf("applied %d entries after the restart, want the 3 created before it", n)
	}
}
