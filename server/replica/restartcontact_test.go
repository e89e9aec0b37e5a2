package replica

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// slowReads delays each read of an entry by delay.
type slowReads struct {
	raft.LogStore
	delay atomic.Int64
}

func (s *slowReads) GetLog(i uint64, l *raft.Log) error {
	if d := time.Duration(s.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	return s.LogStore.GetLog(i, l)
}

// A follower restarting with a long restore and then a long replay hears
// the leader's heartbeats as soon as its raft runs. The leader's heartbeat
// used to be taken while the follower's NewRaft was still restoring: it
// queued for raft's main goroutine, which, once running, first read the
// whole replay for the leader's first AppendEntries, and the leader sent no
// other heartbeat until that one was answered or timed out (10 s), so the
// restarted server heard from no leader, and served nobody, for as long.
// Here the restore is raft's startup scan made slow (10 ms an entry) and
// the replay reads 40 ms an entry (~5 s); each of three restarts must hear
// from the leader within 1.5 s of its raft running, while it still
// replays. Which of the leader's two requests the stalled follower took
// first was up to the scheduler: 3 rounds let an unfixed build pass 1 in 8.
func TestRestartedFollowerHearsTheLeaderWhileItReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a follower three times with slow reads (~10 s)")
	}
	auth, err := KeyAuth(bytes.Repeat([]byte("k"), MinClusterKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	var members []Member
	var lis []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		members = append(members, Member{ID: fmt.Sprintf("s%d", i+1), Addr: l.Addr().String(), Voter: true})
	}
	logs := make([]*slowReads, n)
	stables := make([]*raft.InmemStore, n)
	snaps := make([]*raft.InmemSnapshotStore, n)
	reps := make([]*Replica, n)
	open := func(i int, l net.Listener) *Replica {
		var d net.Dialer
		r, err := New(Config{ID: members[i].ID, Bootstrap: true, BootstrapPeers: members,
			RaftTimeout: 200 * time.Millisecond, CommitTimeout: 2 * time.Millisecond, SnapshotInterval: time.Minute, SnapshotThreshold: 1 << 20,
			PeerListener: l, PeerDial: func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
			PeerAuth: auth, Services: noServices{}, Watcher: nopObserver{},
			LogStore: logs[i], StableStore: stables[i], Snapshots: snaps[i]})
		if err != nil {
			t.Fatal(err)
		}
		r.Start()
		return r
	}
	for i := range reps {
		logs[i] = &slowReads{LogStore: raft.NewInmemStore()}
		stables[i], snaps[i] = raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	}
	for i := range reps {
		reps[i] = open(i, lis[i])
	}
	t.Cleanup(func() {
		for i, r := range reps {
			logs[i].delay.Store(0)
			r.Close()
		}
	})
	leader := -1
	waitUntil(t, "a leader", func() bool {
		for i, r := range reps {
			if r.IsLeader() {
				leader = i
			}
		}
		return leader >= 0
	})
	c := &heldCluster{reps: reps, leader: leader}
	for i := 0; i < 120; i++ {
		if err := c.create(leader, fmt.Sprintf("/n%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	f := (leader + 1) % n
	for round := 1; round <= 3; round++ {
		last := reps[leader].LastIndex()
		waitUntil(t, "the follower applies the writes", func() bool { return reps[f].fsm.applied.Load() >= last })
		logs[f].delay.Store(0)
		if err := reps[f].Close(); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", members[f].Addr)
		if err != nil {
			t.Fatal(err)
		}
		logs[f].delay.Store(int64(10 * time.Millisecond))
		reps[f] = open(f, l)
		ran := time.Now()
		logs[f].delay.Store(int64(40 * time.Millisecond))
		r := reps[f]
		for r.LastContact().Before(ran) && time.Since(ran) < 10*time.Second {
			time.Sleep(2 * time.Millisecond)
		}
		heard, applied := time.Since(ran), r.fsm.applied.Load()
		t.Logf("round %d: heard from the leader %v after its raft ran, replay at %d of %d", round, heard.Round(time.Millisecond), applied, last)
		if heard > 1500*time.Millisecond {
			t.Fatalf("round %d: the restarted follower heard from the leader %v after its raft ran (the replay at %d of %d)", round, heard, applied, last)
		}
		if applied >= last {
			t.Fatalf("round %d: the replay was over (%d of %d) when it heard from the leader: the test did not hold the main goroutine", round, applied, last)
		}
		logs[f].delay.Store(0)
	}
}
