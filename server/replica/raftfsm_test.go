package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"coord/fsm"
	"coord/vocab"
)

// Unit tests of the raft adapter on its own: a Replica with only what
// apply needs (no raft), entries built by hand, raft's in-memory log store.

// nopObserver ignores what applies.
type nopObserver struct{}

func (nopObserver) Applied(*fsm.Command, fsm.Result, []fsm.Trigger) {}
func (nopObserver) Restored(*fsm.View)                              {}

func newBare(origin string) *Replica {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &Replica{cfg: Config{ID: "t"}, origin: origin, log: log, fsm: newRaftFSM(origin, nopObserver{}, log)}
}

// entryOf is a raft entry at index carrying one command per cmds, proposed
// by origin with sequence numbers from seq on.
func entryOf(index uint64, origin string, seq uint64, cmds ...*fsm.Command) *raft.Log {
	ecs := make([]entryCmd, len(cmds))
	for i, c := range cmds {
		ecs[i] = entryCmd{origin: origin, seq: seq + uint64(i), cmd: c.Encode(nil)}
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: encodeEntry(ecs)}
}

func createCmd(path string, data []byte) *fsm.Command {
	return &fsm.Command{Type: fsm.CmdCreate, Time: 1, Op: fsm.Op{Type: fsm.CmdCreate, Path: path, Data: data, ACL: vocab.OpenACLUnsafe}}
}

// snapshotOf streams r's state as raft would persist it.
func snapshotOf(t testing.TB, r *raftFSM) []byte {
	t.Helper()
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	fs := snap.(*fsmSnapshot)
	var b bytes.Buffer
	b.Write(binary.AppendUvarint(nil, fs.index))
	if _, err := fs.view.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Issue 12, defect 1: a waiter is completed only by an entry of its own
// origin, never by a previous boot's entry with the same sequence number.
func TestApplyCompletesOnlyThisBootsProposals(t *testing.T) {
	s := newBare("t#new")
	var got []string
	s.fsm.expect(1, createCmd("/mine", nil), func(ar Result) { got = append(got, ar.Res.Path) })
	s.fsm.ApplyBatch([]*raft.Log{
		entryOf(1, "t#old", 1, createCmd("/old", nil)), // the previous boot's seq 1
		entryOf(2, "t", 1, createCmd("/bare-id", nil)), // an entry with the bare id
		entryOf(3, "t#new", 1, createCmd("/mine", nil)),
	})
	if len(got) != 1 || got[0] != "/mine" {
		t.Fatalf("waiter completed with %q, want only /mine", got)
	}
	if s.fsm.mismatched.Load() != 0 {
		t.Fatal("mismatch counted")
	}

	// Should an origin ever repeat, an entry carrying another command
	// fails the waiter instead of handing it that command's result.
	var errs []error
	s.fsm.expect(2, createCmd("/x", nil), func(ar Result) { errs = append(errs, ar.Err) })
	s.fsm.ApplyBatch([]*raft.Log{entryOf(4, "t#new", 2, createCmd("/y", nil))})
	if len(errs) != 1 || !errors.Is(errs[0], ErrProposalMismatch) || s.fsm.mismatched.Load() != 1 {
		t.Fatalf("waiter for /x given the entry of /y: %v (mismatches %d)", errs, s.fsm.mismatched.Load())
	}
}

// Issue 12, defect 2: a request whose entry may be folded into an installed
// snapshot fails (ConnectionLoss for the client) instead of waiting forever.
func TestRestoreFailsWaitingRequests(t *testing.T) {
	src := newBare("src#1")
	src.fsm.ApplyBatch([]*raft.Log{entryOf(1, "x#1", 1, createCmd("/a", nil)), entryOf(2, "x#1", 2, createCmd("/b", nil))})
	snap := snapshotOf(t, src.fsm)

	s := newBare("t#1")
	done := make(chan error, 1)
	s.fsm.expect(7, createCmd("/w", nil), func(ar Result) { done <- ar.Err })
	if err := s.fsm.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrSnapshotInstalled) {
			t.Fatalf("waiting request failed with %v, want ErrSnapshotInstalled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a request waiting when a snapshot was installed was never completed")
	}
	if n := s.fsm.pendingCount(); n != 0 {
		t.Fatalf("%d requests still pending", n)
	}
	if s.View().Digest() != src.View().Digest() || s.Applied() != 2 {
		t.Fatalf("restored state differs (applied %d)", s.Applied())
	}
}

// Issue 12, defect 4: a snapshot that is not ahead of the applied state is
// not installed; a newer one is.
func TestRestoreRefusesOlderSnapshot(t *testing.T) {
	old := newBare("o#1")
	old.fsm.ApplyBatch([]*raft.Log{entryOf(1, "x#1", 1, createCmd("/a", nil))})
	oldSnap := snapshotOf(t, old.fsm)

	s := newBare("t#1")
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, entryOf(i, "x#1", i, createCmd(fmt.Sprintf("/n%d", i), nil)))
	}
	s.fsm.ApplyBatch(logs)
	before := s.View().Digest()
	waiting := make(chan error, 1)
	s.fsm.expect(3, createCmd("/w", nil), func(ar Result) { waiting <- ar.Err })
	if err := s.fsm.Restore(io.NopCloser(bytes.NewReader(oldSnap))); err != nil {
		t.Fatal(err)
	}
	if s.View().Digest() != before || s.Applied() != 10 {
		t.Fatalf("an older snapshot (index 1) replaced the state at index 10 (now at %d)", s.Applied())
	}
	select {
	case err := <-waiting:
		t.Fatalf("refusing an older snapshot failed a waiting request: %v", err)
	default:
	}
	// The same index is not ahead either.
	same := snapshotOf(t, s.fsm)
	if err := s.fsm.Restore(io.NopCloser(bytes.NewReader(same))); err != nil || s.View().Digest() != before {
		t.Fatalf("restoring the state's own snapshot: %v", err)
	}

	newer := newBare("n#1")
	newer.fsm.ApplyBatch(append(logs, entryOf(11, "x#1", 11, createCmd("/n11", nil))))
	if err := s.fsm.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, newer.fsm)))); err != nil {
		t.Fatal(err)
	}
	if s.View().Digest() != newer.View().Digest() || s.Applied() != 11 {
		t.Fatalf("a newer snapshot was not installed (applied %d)", s.Applied())
	}
}

// longTail is n entries of size bytes of data each.
func longTail(n int, size int) []*raft.Log {
	data := bytes.Repeat([]byte{'x'}, size)
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = entryOf(uint64(i+1), "x#1", uint64(i+1), createCmd(fmt.Sprintf("/n%05d", i), data))
	}
	return logs
}

// readBetween runs apply while a reader takes the read lock as often as it
// can, and returns the applied indexes strictly between first and last
// that the reader saw: a read that got in between chunks.
func readBetween(t *testing.T, s *Replica, last uint64, apply func()) []uint64 {
	t.Helper()
	var stop atomic.Bool
	var seen []uint64
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		once := sync.OnceFunc(func() { close(started) })
		for !stop.Load() {
			s.fsm.mu.RLock()
			a := s.fsm.applied.Load()
			s.fsm.mu.RUnlock()
			if a > 0 && a < last && (len(seen) == 0 || seen[len(seen)-1] != a) {
				seen = append(seen, a)
			}
			once()
		}
	}()
	<-started
	apply()
	stop.Store(true)
	wg.Wait()
	if s.Applied() != last {
		t.Fatalf("applied %d, want %d", s.Applied(), last)
	}
	return seen
}

// Issue 12, defect 3: a long batch from raft is applied in chunks, reads
// getting in between.
func TestApplyBatchLetsReadsIn(t *testing.T) {
	s := newBare("t#1")
	logs := longTail(4000, 512)
	seen := readBetween(t, s, 4000, func() { s.fsm.ApplyBatch(logs) })
	if len(seen) == 0 {
		t.Fatal("no read got in while 4000 entries applied: the apply lock was held throughout")
	}
}

// countingStore records, for each entry read, how far ahead of the applied
// index it is: fastApply must not read the whole tail into memory first.
type countingStore struct {
	raft.LogStore
	r      *raftFSM
	mu     sync.Mutex
	maxGap uint64
}

func (c *countingStore) GetLog(i uint64, l *raft.Log) error {
	c.mu.Lock()
	if gap := i - c.r.applied.Load(); gap > c.maxGap {
		c.maxGap = gap
	}
	c.mu.Unlock()
	return c.LogStore.GetLog(i, l)
}

// Issue 12, defect 3: fastApply reads and applies a long committed tail in
// bounded chunks, reads getting in between.
func TestFastApplyIsChunked(t *testing.T) {
	s := newBare("t#1")
	logs := longTail(4000, 512)
	mem := raft.NewInmemStore()
	if err := mem.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	store := &countingStore{LogStore: mem, r: s.fsm}
	seen := readBetween(t, s, 4000, func() { s.fsm.fastApply(store, 4000, 1) })
	if len(seen) == 0 {
		t.Fatal("no read got in while fastApply applied 4000 entries")
	}
	// The entry at the commit point is read first (its term is checked),
	// then at most a chunk ahead of what is applied.
	store.maxGap = 0
	s2 := newBare("t#2")
	store.r = s2.fsm
	s2.fsm.fastApply(&checkFirst{store}, 4000, 1)
	if store.maxGap > applyChunkEntries {
		t.Fatalf("fastApply read entries up to %d ahead of the applied index; want at most a chunk (%d)", store.maxGap, applyChunkEntries)
	}
	if s2.View().Digest() != s.View().Digest() {
		t.Fatal("chunked fastApply reached another state")
	}
}

// checkFirst lets the first read (the commit point's term check) through
// uncounted.
type checkFirst struct{ *countingStore }

func (c *checkFirst) GetLog(i uint64, l *raft.Log) error {
	if i == 4000 && c.r.applied.Load() == 0 {
		return c.LogStore.GetLog(i, l)
	}
	return c.countingStore.GetLog(i, l)
}

// fastApply over a tail where a whole chunk holds no command (raft's
// barriers, one per sync, and no-ops) still moves on: it used to read the
// same chunk again forever, and Close then waited for it.
func TestFastApplyCrossesEntriesWithoutCommands(t *testing.T) {
	s := newBare("t#1")
	var logs []*raft.Log
	idx := uint64(0)
	add := func(l *raft.Log) { idx++; l.Index, l.Term = idx, 1; logs = append(logs, l) }
	add(entryOf(0, "x#1", 1, createCmd("/a", nil)))
	for i := 0; i < 3*applyChunkEntries; i++ {
		add(&raft.Log{Type: raft.LogBarrier})
	}
	add(&raft.Log{Type: raft.LogNoop})
	add(entryOf(0, "x#1", 2, createCmd("/b", nil)))
	mem := raft.NewInmemStore()
	if err := mem.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.fsm.fastApply(mem, idx, 1); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("fastApply did not return over a tail of barriers")
	}
	if s.Applied() != idx {
		t.Fatalf("applied %d, want %d", s.Applied(), idx)
	}
	if _, err := s.View().Exists("/b"); err != nil {
		t.Fatalf("/b after the barriers: %v", err)
	}
}

// Issue 28: a client's read on a follower that reads commit notices waits
// for the commit of the commands its log held when the read came in, and
// sees them; an entry whose commit never comes delays one read only.
func TestReadFreshWaitsForHeldCommands(t *testing.T) {
	s := newBare("o")
	s.noticesUp.Store(true)
	s.fsm.freshWait = time.Minute
	s.fsm.ApplyBatch([]*raft.Log{entryOf(1, "x", 1, createCmd("/a", nil))})
	s.fsm.held.Store(2) // entry 2 is in the log, its commit not yet known

	got := make(chan bool, 1)
	go s.ReadFresh(func(v *fsm.View) {
		_, _, err := v.GetData("/b", nil)
		got <- err == nil
	})
	select {
	case <-got:
		t.Fatal("the read did not wait for the command its log held")
	case <-time.After(50 * time.Millisecond):
	}
	s.fsm.ApplyBatch([]*raft.Log{entryOf(2, "x", 2, createCmd("/b", nil))})
	if !<-got {
		t.Fatal("the read after the wait did not show the held command")
	}

	// Not a follower that reads notices (a leader, or notices down): no wait.
	s.noticesUp.Store(false)
	s.fsm.held.Store(3)
	done := make(chan struct{})
	go s.ReadFresh(func(*fsm.View) { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a read without notices waited")
	}

	// An entry that never commits: one read waits its bound, the next not.
	s.noticesUp.Store(true)
	s.fsm.freshWait = 300 * time.Millisecond
	start := time.Now()
	s.ReadFresh(func(*fsm.View) {})
	if d := time.Since(start); d < s.fsm.freshWait {
		t.Fatalf("the first read waited %v for an uncommitted entry; want its bound %v", d, s.fsm.freshWait)
	}
	start = time.Now()
	s.ReadFresh(func(*fsm.View) {})
	if d := time.Since(start); d >= s.fsm.freshWait {
		t.Fatalf("the second read waited %v again for the entry the first gave up on", d)
	}
}

// The log store remembers the last command it holds for awaitFresh:
// entries without commands do not move it, a delete of the tail forgets it.
func TestLogStoreTracksHeldCommand(t *testing.T) {
	s := newBare("o")
	k := kickingLogStore{LogStore: raft.NewInmemStore(), fsm: s.fsm}
	if err := k.StoreLogs([]*raft.Log{entryOf(1, "x", 1, createCmd("/a", nil)), entryOf(2, "x", 2, createCmd("/b", nil)), {Index: 3, Term: 1, Type: raft.LogNoop}}); err != nil {
		t.Fatal(err)
	}
	if h := s.fsm.held.Load(); h != 2 {
		t.Fatalf("held %d after commands up to 2 and a no-op; want 2", h)
	}
	if err := k.DeleteRange(1, 1); err != nil { // compaction of the head
		t.Fatal(err)
	}
	if h := s.fsm.held.Load(); h != 2 {
		t.Fatalf("held %d after compacting entry 1; want 2", h)
	}
	if err := k.DeleteRange(2, 3); err != nil { // a conflicting tail goes
		t.Fatal(err)
	}
	if h := s.fsm.held.Load(); h != 0 {
		t.Fatalf("held %d after the tail was deleted; want 0", h)
	}
}
