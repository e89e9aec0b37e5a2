package replica

import (
	"bytes"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestSnapshotRollSpreads: the log size that triggers a snapshot is drawn
// for each snapshot between half the limit and the limit, so servers that
// apply the same entries do not all write their snapshots at once.
func TestSnapshotRollSpreads(t *testing.T) {
	f := newRaftFSM("t#0", nil, nil)
	f.snapLimit = 1 << 20
	seen := map[uint64]bool{}
	for range 100 {
		f.rollSnapAt()
		at := f.snapAt.Load()
		if at < f.snapLimit/2 || at > f.snapLimit {
			t.Fatalf("snapshot at %d bytes with a limit of %d", at, f.snapLimit)
		}
		seen[at] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 draws gave %d sizes: servers would snapshot together", len(seen))
	}
	// A snapshot four times the limit moves the next one to its quarter.
	f.snaps.lastSize.Store(8 << 20)
	for range 10 {
		f.rollSnapAt()
		if at := f.snapAt.Load(); at != 2<<20 {
			t.Fatalf("after an 8 MiB snapshot with a 1 MiB limit, the next at %d bytes, want 2 MiB", at)
		}
	}
	f.snapLimit = 0
	f.rollSnapAt()
	if at := f.snapAt.Load(); at != 0 {
		t.Fatalf("no limit, but a snapshot at %d bytes", at)
	}
}

// niceSink is a snapshot sink that records the nice value of the thread
// each Write runs on.
type niceSink struct {
	bytes.Buffer
	nice []int
}

func (s *niceSink) Write(p []byte) (int, error) {
	n, err := threadNice()
	if err == nil {
		s.nice = append(s.nice, n)
	}
	return s.Buffer.Write(p)
}
func (s *niceSink) Close() error  { return nil }
func (s *niceSink) ID() string    { return "nice" }
func (s *niceSink) Cancel() error { return nil }

// TestSnapshotWrittenAtLowPriority: a snapshot is encoded and written on a
// thread at snapshotNice, and the caller's thread keeps its priority.
func TestSnapshotWrittenAtLowPriority(t *testing.T) {
	if snapshotNice == 0 {
		t.Skip("thread priorities are set on Linux only")
	}
	f := newRaftFSM("t#0", nopObserver{}, slog.New(slog.DiscardHandler))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadNice()
	if err != nil {
		t.Fatal(err)
	}
	sink := &niceSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if len(sink.nice) == 0 {
		t.Fatal("the snapshot wrote nothing")
	}
	for _, n := range sink.nice {
		if n != snapshotNice {
			t.Fatalf("the snapshot was written at nice %d, want %d", n, snapshotNice)
		}
	}
	if after, _ := threadNice(); after != before {
		t.Fatalf("the caller's thread went from nice %d to %d", before, after)
	}
}

// TestSnapshotFits: a snapshot due by log size is taken only if the data
// directory has room for the newest snapshot's size plus the log applied
// since it, with the wal's next segment left over.
func TestSnapshotFits(t *testing.T) {
	store := raft.NewInmemSnapshotStore()
	sink, err := store.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write(make([]byte, 5000))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	f := newRaftFSM("t#0", nopObserver{}, slog.New(slog.DiscardHandler))
	f.snaps.sinceBytes.Store(700)
	r := &Replica{cfg: Config{DataDir: t.TempDir()}, snapStore: store, storeKind: LogStoreWAL, fsm: f}
	need := uint64(5000 + 700 + WALSegmentBytes)
	defer func(old func(string) (uint64, error)) { diskFree = old }(diskFree)
	for _, c := range []struct {
		free uint64
		fits bool
	}{{need, true}, {need - 1, false}, {10 * need, true}, {WALSegmentBytes, false}} {
		diskFree = func(string) (uint64, error) { return c.free, nil }
		if _, got, ok := r.snapshotFits(); ok != c.fits || got != need {
			t.Errorf("free %d: fits %v needing %d, want %v needing %d", c.free, ok, got, c.fits, need)
		}
	}
}

// TestSnapshotWaitsForTheReplay: a snapshot due by log size waits until the
// server has applied the log it started with, and no longer than that; a
// replica closing meanwhile ends the wait.
func TestSnapshotWaitsForTheReplay(t *testing.T) {
	f := newRaftFSM("t#0", nopObserver{}, slog.New(slog.DiscardHandler))
	r := &Replica{fsm: f, closing: make(chan struct{}), replayTo: 10}
	f.applied.Store(4)
	done := make(chan bool, 1)
	go func() { done <- r.awaitReplay() }()
	select {
	case <-done:
		t.Fatal("the snapshot went ahead with the replay at 4 of 10")
	case <-time.After(300 * time.Millisecond):
	}
	f.applied.Store(10)
	f.signalApplied()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("awaitReplay = false with the replica open")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the snapshot still waits with the replay done")
	}

	// Nothing to replay: no wait.
	start := time.Now()
	if !r.awaitReplay() || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("awaitReplay with the replay done took %v", time.Since(start))
	}

	g := newRaftFSM("t#1", nopObserver{}, slog.New(slog.DiscardHandler))
	closing := &Replica{fsm: g, closing: make(chan struct{}), replayTo: 10}
	go func() { done <- closing.awaitReplay() }()
	close(closing.closing)
	select {
	case ok := <-done:
		if ok {
			t.Fatal("awaitReplay = true after the replica closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a closed replica's snapshotter still waits for the replay")
	}
}
