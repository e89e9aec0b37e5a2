package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"coord/fsm"
	"coord/vocab"
)

// heldStore is an in-memory log store whose appends wait while the test
// holds them, and which records the
// order of the entries it stored.
type heldStore struct {
	*raft.InmemStore
	mu     sync.Mutex
	hold   chan struct{} // non-nil: writes wait for it to close
	fail   error         // non-nil: writes fail with it
	stored []uint64      // indexes in the order they were stored
	writes chan struct{} // a write started (buffered)
}

func newHeldStore() *heldStore {
	return &heldStore{InmemStore: raft.NewInmemStore(), writes: make(chan struct{}, 1000)}
}

func (h *heldStore) holdWrites() {
	h.mu.Lock()
	h.hold = make(chan struct{})
	h.mu.Unlock()
}

func (h *heldStore) release() {
	h.mu.Lock()
	if h.hold != nil {
		close(h.hold)
		h.hold = nil
	}
	h.mu.Unlock()
}

func (h *heldStore) wait() error {
	h.writes <- struct{}{}
	h.mu.Lock()
	hold, err := h.hold, h.fail
	h.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return err
}

func (h *heldStore) StoreLog(l *raft.Log) error { return h.StoreLogs([]*raft.Log{l}) }

func (h *heldStore) StoreLogs(logs []*raft.Log) error {
	if err := h.wait(); err != nil {
		return err
	}
	h.mu.Lock()
	for _, l := range logs {
		h.stored = append(h.stored, l.Index)
	}
	h.mu.Unlock()
	return h.InmemStore.StoreLogs(logs)
}

func (h *heldStore) order() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.stored...)
}

func cmdEntries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: marker(i)})
	}
	return out
}

func newTestOverlap(store raft.LogStore, leading *bool, mu *sync.Mutex) *overlapLog {
	o := newOverlapLog(store, "s1", nil, nil)
	f := func() bool { mu.Lock(); defer mu.Unlock(); return *leading }
	o.leading.Store(&f)
	return o
}

// returnsWithin runs f and reports whether it returned within d.
func returnsWithin(d time.Duration, f func()) (done chan struct{}, ok bool) {
	done = make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return done, true
	case <-time.After(d):
		return done, false
	}
}

// appendWaits starts o.StoreLogs of entries from..to and fails t (saying
// why the append should wait) if it returns within d; the channel closes
// when it returns.
func appendWaits(t *testing.T, o *overlapLog, from, to uint64, d time.Duration, why string) chan struct{} {
	t.Helper()
	done, ok := returnsWithin(d, func() {
		if err := o.StoreLogs(cmdEntries(from, to)); err != nil {
			t.Error(err)
		}
	})
	if ok {
		t.Fatalf("an append returned, %s", why)
	}
	return done
}

// On a leader an append returns before it is durable; the entries are
// served from memory meanwhile, the commit bound stays below them and
// AwaitDurable waits for them.
func TestOverlapLogQueuesOnTheLeader(t *testing.T) {
	h := newHeldStore()
	var mu sync.Mutex
	leading := true
	o := newTestOverlap(h, &leading, &mu)
	defer o.close()

	if err := o.StoreLogs(cmdEntries(1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.AwaitDurable(2); err != nil {
		t.Fatal(err)
	}
	if b := o.CommitBound(); b != math.MaxUint64 {
		t.Fatalf("bound %d with nothing pending, want none", b)
	}

	h.holdWrites()
	if _, ok := returnsWithin(2*time.Second, func() {
		if err := o.StoreLogs(cmdEntries(3, 5)); err != nil {
			t.Error(err)
		}
	}); !ok {
		t.Fatal("a leader's append waited for the store")
	}
	<-h.writes // the writer is storing 3..5
	// One batch in flight: the next waits for it, as raft's own order
	// would have it wait, so that a loaded leader's batches grow.
	next := appendWaits(t, o, 6, 6, 100*time.Millisecond, "a second batch queued while the first was being written")
	var l raft.Log
	if err := o.GetLog(4, &l); err != nil || string(l.Data) != string(marker(4)) {
		t.Fatalf("pending entry 4: %v %q", err, l.Data)
	}
	if last, _ := o.LastIndex(); last != 5 {
		t.Fatalf("last index %d, want 5", last)
	}
	if b := o.CommitBound(); b != 2 {
		t.Fatalf("commit bound %d while 3..5 are not durable, want 2", b)
	}
	if waited, err := o.AwaitDurable(2); err != nil || waited {
		t.Fatalf("AwaitDurable(2) of a durable entry: waited %v, %v", waited, err)
	}
	done, ok := returnsWithin(100*time.Millisecond, func() {
		if waited, err := o.AwaitDurable(4); err != nil || !waited {
			t.Errorf("AwaitDurable(4): waited %v, %v", waited, err)
		}
	})
	if ok {
		t.Fatal("AwaitDurable(4) returned while 4 was not durable")
	}
	h.release()
	<-done
	<-next
	if _, err := o.AwaitDurable(6); err != nil {
		t.Fatal(err)
	}
	if b := o.CommitBound(); b != math.MaxUint64 {
		t.Fatalf("bound %d once all are durable", b)
	}
	if got := h.order(); len(got) != 6 || got[4] != 5 || got[5] != 6 {
		t.Fatalf("stored %v, want 1..6 in order", got)
	}
}

// votersConfig is a configuration of the voters ids and the non-voters
// others.
func votersConfig(ids []raft.ServerID, others ...raft.ServerID) raft.Configuration {
	var cfg raft.Configuration
	for _, id := range ids {
		cfg.Servers = append(cfg.Servers, raft.Server{ID: id, Suffrage: raft.Voter, Address: raft.ServerAddress(id)})
	}
	for _, id := range others {
		cfg.Servers = append(cfg.Servers, raft.Server{ID: id, Suffrage: raft.Nonvoter, Address: raft.ServerAddress(id)})
	}
	return cfg
}

// On a leader whose disk holds its append, queued entries count as held by
// a majority once enough voters among the followers acknowledged them in
// this term: a non-voter, another term's acknowledgement or one follower
// of three voters is not enough. The next batch is queued behind a batch
// a majority holds, and the one after waits.
func TestOverlapLogCountsFollowersThatHoldIt(t *testing.T) {
	h := newHeldStore()
	var mu sync.Mutex
	leading := true
	o := newTestOverlap(h, &leading, &mu)
	defer func() { h.release(); o.close() }()
	o.mu.Lock()
	o.setVoters(termIndex{1, 1}, 0, votersConfig([]raft.ServerID{"s1", "s2", "s3"}, "s4"))
	o.mu.Unlock()

	h.holdWrites()
	if err := o.StoreLogs(cmdEntries(1, 3)); err != nil {
		t.Fatal(err)
	}
	<-h.writes // the writer is storing 1..3
	awaited, ok := returnsWithin(50*time.Millisecond, func() {
		if waited, err := o.AwaitDurable(2); err != nil || !waited {
			t.Errorf("AwaitDurable(2): waited %v, %v", waited, err)
		}
	})
	if ok {
		t.Fatal("AwaitDurable(2) returned with nothing held by anyone")
	}
	o.Acked("s2", 1, 3)
	o.Acked("s4", 1, 3) // a non-voter
	o.Acked("s3", 0, 3) // an earlier term's leader
	if b := o.CommitBound(); b != 0 {
		t.Fatalf("commit bound %d with one voter of three holding 1..3, want 0", b)
	}
	select {
	case <-awaited:
		t.Fatal("AwaitDurable(2) returned with one voter of three holding it")
	case <-time.After(50 * time.Millisecond):
	}

	o.Acked("s3", 1, 2)
	<-awaited
	if b := o.CommitBound(); b != 2 {
		t.Fatalf("commit bound %d once s2 and s3 hold 1..2, want 2", b)
	}
	// 3 is held by one follower: the next batch waits for it.
	next := appendWaits(t, o, 4, 4, 50*time.Millisecond, "a batch queued behind one a majority does not hold")
	o.Acked("s3", 1, 3)
	<-next
	if b := o.CommitBound(); b != 3 {
		t.Fatalf("commit bound %d with 4 queued behind 1..3, want 3", b)
	}
	var l raft.Log
	if err := o.GetLog(4, &l); err != nil || string(l.Data) != string(marker(4)) {
		t.Fatalf("queued entry 4: %v %q", err, l.Data)
	}
	if last, _ := o.LastIndex(); last != 4 {
		t.Fatalf("last index %d, want 4", last)
	}
	// 4 is held by nobody: the one after waits.
	third := appendWaits(t, o, 5, 5, 50*time.Millisecond, "a third batch queued behind one nobody holds")
	h.release()
	<-third
	if _, err := o.AwaitDurable(5); err != nil {
		t.Fatal(err)
	}
	if got := h.order(); len(got) != 5 || got[3] != 4 || got[4] != 5 {
		t.Fatalf("stored %v, want 1..5 in order", got)
	}
	if b := o.CommitBound(); b != math.MaxUint64 {
		t.Fatalf("bound %d once all are durable", b)
	}
}

// The voters follow the configuration entries a leader stores; an entry of
// an earlier term counts only once one of this term does.
func TestOverlapLogVotersFollowTheConfiguration(t *testing.T) {
	h := newHeldStore()
	var mu sync.Mutex
	leading := true
	o := newTestOverlap(h, &leading, &mu)
	defer func() { h.release(); o.close() }()
	setVoters := func(at termIndex, from uint64, ids ...raft.ServerID) {
		o.mu.Lock()
		o.setVoters(at, from, votersConfig(ids))
		o.mu.Unlock()
	}
	wantBound := func(want uint64, when string) {
		t.Helper()
		if b := o.CommitBound(); b != want {
			t.Fatalf("bound %d with %s, want %d", b, when, want)
		}
	}
	// queue stores what is queued, then queues logs with the store held.
	queue := func(logs ...*raft.Log) {
		t.Helper()
		h.release()
		waitUntil(t, "the queue stored", func() bool { return o.firstPending.Load() == 0 })
		h.holdWrites()
		if err := o.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	setVoters(termIndex{2, 1}, 0, "s1", "s2", "s3")
	// Five voters from entry 2 on.
	cfg := raft.Log{Index: 2, Term: 2, Type: raft.LogConfiguration,
		Data: raft.EncodeConfiguration(votersConfig([]raft.ServerID{"s1", "s2", "s3", "s4", "s5"}))}
	if err := o.StoreLogs([]*raft.Log{{Index: 1, Term: 2, Type: raft.LogNoop}, &cfg}); err != nil {
		t.Fatal(err)
	}
	// A voter set read from raft late, in the same term, does not
	// replace it.
	setVoters(termIndex{2, 0}, 2, "s1", "s2", "s3")

	queue(&raft.Log{Index: 3, Term: 1, Type: raft.LogCommand}, &raft.Log{Index: 4, Term: 2, Type: raft.LogCommand})
	o.Acked("s2", 2, 4)
	o.Acked("s3", 2, 4)
	wantBound(2, "2 of 4 followers of 5 voters holding 3..4")
	o.Acked("s4", 2, 3)
	wantBound(2, "3 of 5 voters holding only entry 3, of an earlier term")
	o.Acked("s4", 2, 4)
	wantBound(4, "3 of 5 voters holding 3..4")

	// In term 3 the voters read from raft once entry 5 was handed in
	// govern only the entries after it: 5 may be of the configuration
	// before.
	queue(&raft.Log{Index: 5, Term: 3, Type: raft.LogCommand})
	setVoters(termIndex{3, 0}, o.lastHanded, "s1", "s2", "s3")
	o.Acked("s2", 3, 5)
	o.Acked("s3", 3, 5)
	wantBound(4, "entry 5 handed in before the voters were read")
	queue(&raft.Log{Index: 6, Term: 3, Type: raft.LogCommand})
	o.Acked("s2", 3, 6)
	o.Acked("s3", 3, 6)
	wantBound(6, "2 followers of 3 voters holding entry 6")
}

// A follower's append, a configuration and a delete that reaches pending
// entries are synchronous and come after everything queued; a delete of
// the head does not wait.
func TestOverlapLogSynchronousWhereRaftActsOnIt(t *testing.T) {
	h := newHeldStore()
	var mu sync.Mutex
	leading := true
	o := newTestOverlap(h, &leading, &mu)
	defer o.close()

	if err := o.StoreLogs(cmdEntries(1, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.AwaitDurable(3); err != nil {
		t.Fatal(err)
	}
	h.holdWrites()
	if err := o.StoreLogs(cmdEntries(4, 4)); err != nil {
		t.Fatal(err)
	}
	<-h.writes
	cfg := &raft.Log{Index: 5, Term: 1, Type: raft.LogConfiguration}
	done, ok := returnsWithin(100*time.Millisecond, func() {
		if err := o.StoreLogs([]*raft.Log{cfg}); err != nil {
			t.Error(err)
		}
	})
	if ok {
		t.Fatal("a configuration entry was stored before the entries queued ahead of it were durable")
	}
	h.release()
	<-done
	if got := h.order(); len(got) != 5 || got[3] != 4 || got[4] != 5 {
		t.Fatalf("stored %v, want 4 before the configuration at 5", got)
	}

	// A follower: synchronous.
	mu.Lock()
	leading = false
	mu.Unlock()
	h.holdWrites()
	done, ok = returnsWithin(100*time.Millisecond, func() {
		if err := o.StoreLogs(cmdEntries(6, 6)); err != nil {
			t.Error(err)
		}
	})
	if ok {
		t.Fatal("a follower's append returned before the store had it")
	}
	<-h.writes
	h.release()
	<-done

	// The head goes while entries are pending; the tail waits for them.
	mu.Lock()
	leading = true
	mu.Unlock()
	h.holdWrites()
	if err := o.StoreLogs(cmdEntries(7, 8)); err != nil {
		t.Fatal(err)
	}
	<-h.writes
	if _, ok := returnsWithin(time.Second, func() {
		if err := o.DeleteRange(1, 2); err != nil {
			t.Error(err)
		}
	}); !ok {
		t.Fatal("a delete of the head waited for the pending entries")
	}
	done, ok = returnsWithin(100*time.Millisecond, func() {
		if err := o.DeleteRange(8, 8); err != nil {
			t.Error(err)
		}
	})
	if ok {
		t.Fatal("a delete of pending entries did not wait for them")
	}
	h.release()
	<-done
	if first, _ := o.FirstIndex(); first != 3 {
		t.Fatalf("first index %d, want 3", first)
	}
	if last, _ := o.LastIndex(); last != 7 {
		t.Fatalf("last index %d, want 7", last)
	}
}

// A queued write that fails fails the log: the failure is reported,
// AwaitDurable and every later call return it.
func TestOverlapLogFailedWriteFailsTheLog(t *testing.T) {
	h := newHeldStore()
	var mu sync.Mutex
	leading := true
	var reported []error
	o := newOverlapLog(h, "s1", nil, func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
	f := func() bool { return true }
	o.leading.Store(&f)
	defer o.close()

	boom := errors.New("fsync: input/output error")
	h.mu.Lock()
	h.fail = boom
	h.mu.Unlock()
	if err := o.StoreLogs(cmdEntries(1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.AwaitDurable(2); !errors.Is(err, boom) || !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("AwaitDurable: %v, want the write's failure", err)
	}
	if err := o.StoreLogs(cmdEntries(3, 3)); !errors.Is(err, boom) {
		t.Fatalf("append after the failure: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !errors.Is(reported[0], boom) {
		t.Fatalf("reported %v, want the failure once", reported)
	}
	_ = leading
}

// close stores what was queued before it returns.
func TestOverlapLogCloseStoresTheQueue(t *testing.T) {
	h := newHeldStore()
	var mu sync.Mutex
	leading := true
	o := newTestOverlap(h, &leading, &mu)
	h.holdWrites()
	if err := o.StoreLogs(cmdEntries(1, 3)); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(50 * time.Millisecond); h.release() }()
	o.close()
	if last, _ := h.InmemStore.LastIndex(); last != 3 {
		t.Fatalf("store's last index %d after close, want 3", last)
	}
}

// heldCluster starts voters voters and observers non-voters over TCP peer
// planes, each on a heldStore (the overlap on), and waits until one leader
// took a write ("/first") that every server stored.
type heldCluster struct {
	reps    []*Replica
	stores  []*heldStore
	members []Member
	leader  int
}

func startHeldCluster(t *testing.T, voters, observers int, raftTimeout time.Duration) *heldCluster {
	t.Helper()
	auth, err := KeyAuth(bytes.Repeat([]byte("k"), MinClusterKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	c := &heldCluster{}
	n := voters + observers
	var lis []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		c.members = append(c.members, Member{ID: fmt.Sprintf("s%d", i+1), Addr: l.Addr().String(), Voter: i < voters})
	}
	c.stores = make([]*heldStore, n)
	c.reps = make([]*Replica, n)
	for i := range c.reps {
		c.stores[i] = newHeldStore()
		var d net.Dialer
		r, err := New(Config{ID: c.members[i].ID, Bootstrap: i < voters, BootstrapPeers: c.members[:voters],
			RaftTimeout: raftTimeout, CommitTimeout: 2 * time.Millisecond, SnapshotInterval: time.Minute, SnapshotThreshold: 1 << 20,
			PeerListener: lis[i], PeerDial: func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
			PeerAuth: auth, Services: noServices{}, Watcher: nopObserver{},
			LogStore: c.stores[i], StableStore: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore(),
			overlapHandedIn: true})
		if err != nil {
			t.Fatal(err)
		}
		c.reps[i] = r
	}
	for _, r := range c.reps {
		r.Start()
	}
	t.Cleanup(func() {
		for _, s := range c.stores {
			s.release()
		}
		for _, r := range c.reps {
			r.Close()
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		found := -1
		for i, r := range c.reps[:voters] {
			if r.IsLeader() {
				found = i
			}
		}
		if found >= 0 && c.create(found, "/first") == nil {
			c.leader = found
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader took a write within 10 s")
		}
	}
	for _, m := range c.members[voters:] {
		if err := c.reps[c.leader].AddNonvoter(m.ID, m.Addr, 10*time.Second); err != nil {
			t.Fatalf("adding %s as an observer: %v", m.ID, err)
		}
	}
	last := c.reps[c.leader].raft.LastIndex()
	for i, s := range c.stores {
		waitUntil(t, c.members[i].ID+" stores the set-up", func() bool {
			l, _ := s.InmemStore.LastIndex()
			return l >= last
		})
	}
	return c
}

// create proposes a persistent znode at path on replica i.
func (c *heldCluster) create(i int, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.reps[i].Propose(ctx, &fsm.Command{Type: fsm.CmdCreate, Op: fsm.Op{
		Type: fsm.CmdCreate, Path: path, ACL: vocab.OpenACLUnsafe, Mode: vocab.ModePersistent}})
	return err
}

// In a real cluster of 3 voters and an observer, raft on the leader counts
// a write committed once one follower holds it (it counts the leader's own
// queued append). While the leader's and that other follower's disks hold
// their appends, only one voter and the observer hold it durably: no
// follower learns the commit and no server applies or answers it. Once the
// second follower holds it, a majority of the voters does without the
// leader: it applies everywhere and is answered while the leader's own
// disk still holds it back.
func TestOverlapCommitsWhatAMajorityOfVotersHolds(t *testing.T) {
	c := startHeldCluster(t, 3, 1, 200*time.Millisecond)
	reps, stores, members, leader := c.reps, c.stores, c.members, c.leader
	l := reps[leader]
	slow := (leader + 1) % 3 // the follower whose disk is held too

	stores[leader].holdWrites()
	stores[slow].holdWrites()
	base := l.raft.LastIndex()
	answered := make(chan error, 1)
	go func() { answered <- c.create(leader, "/held") }()
	var idx uint64 // the write's entry: the leader's last once it appended it
	waitUntil(t, "the leader appends the write", func() bool {
		idx = l.raft.LastIndex()
		return idx > base
	})
	waitUntil(t, "raft counts the write committed on the leader", func() bool { return l.raft.CommitIndex() >= idx })
	for i, s := range stores {
		if i != leader && i != slow {
			waitUntil(t, fmt.Sprintf("%s stores the write", members[i].ID), func() bool {
				last, _ := s.InmemStore.LastIndex()
				return last >= idx
			})
		}
	}
	time.Sleep(300 * time.Millisecond) // 150 commit timeouts
	for i, r := range reps {
		if i != leader && r.CommitIndex() >= idx {
			t.Errorf("%s learned commit %d while one voter of 3 holds entry %d durably", members[i].ID, r.CommitIndex(), idx)
		}
		if got := r.fsm.applied.Load(); got >= idx {
			t.Errorf("%s applied entry %d while one voter of 3 holds it durably", members[i].ID, got)
		}
	}
	select {
	case err := <-answered:
		t.Fatalf("the write was answered (%v) while one voter of 3 held it durably", err)
	default:
	}

	stores[slow].release()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the write, once two followers hold it: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write was not answered once two followers of 3 voters held it")
	}
	for i, r := range reps {
		waitUntil(t, members[i].ID+" applies the write", func() bool { return r.fsm.applied.Load() >= idx })
	}
	if last, _ := stores[leader].InmemStore.LastIndex(); last >= idx {
		t.Fatalf("the leader's disk was held, yet it stored entry %d", idx)
	}

	stores[leader].release()
	waitUntil(t, "the leader stores the write", func() bool {
		last, _ := stores[leader].InmemStore.LastIndex()
		return last >= idx
	})
	if err := c.create(leader, "/after"); err != nil {
		t.Fatalf("a write after the leader's disk is back: %v", err)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}
