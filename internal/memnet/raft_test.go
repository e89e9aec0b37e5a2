package memnet_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"coord/internal/memnet"
)

// streamLayer is raft's StreamLayer on a memnet host.
type streamLayer struct {
	net.Listener
	host *memnet.Host
}

func (s streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.host.Dial(ctx, string(addr))
}

// counterFSM sums the uint64 entries it applies.
type counterFSM struct {
	mu      sync.Mutex
	entries int
	sum     uint64
}

func (f *counterFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries++
	f.sum += binary.BigEndian.Uint64(l.Data)
	return nil
}

func (f *counterFSM) state() (int, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.entries, f.sum
}

func (f *counterFSM) count() int {
	a, _ := f.state()
	return a
}

func (f *counterFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return counterSnap{f.entries, f.sum}, nil
}

func (f *counterFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [16]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries, f.sum = int(binary.BigEndian.Uint64(b[:8])), binary.BigEndian.Uint64(b[8:])
	return nil
}

type counterSnap struct {
	applied int
	sum     uint64
}

func (s counterSnap) Persist(sink raft.SnapshotSink) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(s.applied))
	binary.BigEndian.PutUint64(b[8:], s.sum)
	if _, err := sink.Write(b[:]); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (counterSnap) Release() {}

type raftNode struct {
	name string
	r    *raft.Raft
	fsm  *counterFSM
}

// TestRaft runs a three-node raft cluster on hashicorp/raft's
// NetworkTransport over memnet: it elects a leader, applies entries,
// elects another once the leader is isolated, and takes the old leader
// back after the heal.
func TestRaft(t *testing.T) {
	const wait = 10 * time.Second // the bound of every phase
	n := memnet.New()
	names := []string{"s1", "s2", "s3"}
	var servers []raft.Server
	for _, name := range names {
		servers = append(servers, raft.Server{ID: raft.ServerID(name), Address: raft.ServerAddress(name + ":7000")})
	}
	var nodes []*raftNode
	for _, name := range names {
		h := n.Host(name)
		lis, err := h.Listen(name + ":7000")
		if err != nil {
			t.Fatal(err)
		}
		trans := raft.NewNetworkTransport(streamLayer{lis, h}, 3, time.Second, io.Discard)
		cfg := raft.DefaultConfig()
		cfg.LocalID = raft.ServerID(name)
		cfg.HeartbeatTimeout = 50 * time.Millisecond
		cfg.ElectionTimeout = 50 * time.Millisecond
		cfg.LeaderLeaseTimeout = 50 * time.Millisecond
		cfg.CommitTimeout = 5 * time.Millisecond
		cfg.LogOutput = io.Discard
		logs, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(cfg, logs, logs, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		fsm := &counterFSM{}
		r, err := raft.NewRaft(cfg, fsm, logs, logs, snaps, trans)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &raftNode{name: name, r: r, fsm: fsm})
		t.Cleanup(func() {
			r.Shutdown().Error()
			trans.Close()
		})
	}

	// leader waits for one of among to lead.
	leader := func(among []*raftNode) *raftNode {
		t.Helper()
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			for _, nd := range among {
				if nd.r.State() == raft.Leader {
					return nd
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("no leader among %d nodes within %v", len(among), wait)
		return nil
	}
	// apply applies entries from..to-1 on whichever of among leads, again
	// on the next leader if leadership moves meanwhile.
	apply := func(among []*raftNode, from, to int) *raftNode {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			l := leader(among)
			futures := make([]raft.ApplyFuture, 0, to-from)
			for i := from; i < to; i++ {
				var b [8]byte
				binary.BigEndian.PutUint64(b[:], uint64(i))
				futures = append(futures, l.r.Apply(b[:], time.Second))
			}
			var err error
			for _, f := range futures {
				if e := f.Error(); e != nil && err == nil {
					err = e
				}
			}
			if err == nil {
				return l
			}
			if time.Now().After(deadline) || !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, raft.ErrEnqueueTimeout) {
				t.Fatalf("apply on %s: %v", l.name, err)
			}
			// Leadership moved: apply them again. The counter counts a
			// retried entry twice if the lost leader had committed it;
			// waitApplied accepts that.
		}
	}
	// waitApplied waits for every node of among to have applied at least
	// count entries and to agree with the others.
	waitApplied := func(among []*raftNode, count int) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			var states []string
			agree := true
			for _, nd := range among {
				a, s := nd.fsm.state()
				states = append(states, fmt.Sprintf("%s: %d entries, sum %d", nd.name, a, s))
				a0, s0 := among[0].fsm.state()
				if a < count || a != a0 || s != s0 {
					agree = false
				}
			}
			if agree {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not applied everywhere within %v: %v", wait, states)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	first := apply(nodes, 0, 100)
	waitApplied(nodes, 100)
	t.Logf("first leader %s", first.name)

	n.Isolate(first.name)
	var rest []*raftNode
	for _, nd := range nodes {
		if nd != first {
			rest = append(rest, nd)
		}
	}
	second := apply(rest, 100, 150)
	waitApplied(rest, 150)
	t.Logf("second leader %s", second.name)
	// The old leader applied none of the 50 (counts include entries
	// applied twice by a retry, so compare with the new leader's).
	if old, now := first.fsm.count(), second.fsm.count(); old+50 > now {
		t.Fatalf("the isolated old leader applied %d entries, the new leader %d", old, now)
	}

	n.Heal()
	// The old leader steps down, catches up and the cluster goes on.
	apply(nodes, 150, 160)
	waitApplied(nodes, 160)
}
