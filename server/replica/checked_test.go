package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

var discardLog = slog.New(slog.DiscardHandler)

// openChecked opens the raw stores of kind under dataDir and the checked
// store over them; onFail may be nil.
func openChecked(t *testing.T, dataDir, kind string, onFail func(error)) (*checkedStore, raft.LogStore, raft.StableStore, io.Closer) {
	t.Helper()
	ls, ss, closer, got, err := openLogStore(dataDir, kind, discardLog)
	if err != nil {
		t.Fatal(err)
	}
	return newCheckedStore(ls, ss, dataDir, got, onFail), ls, ss, closer
}

// marker is the unique text in entry i's data that a test finds on disk.
func marker(i uint64) []byte { return []byte(fmt.Sprintf("<payload of entry %06d>", i)) }

// entryData is entry i's data: its marker and filler, size bytes.
func entryData(i uint64, size int) []byte {
	d := bytes.Repeat([]byte{'.'}, size)
	copy(d[size/2:], marker(i))
	return d
}

func entries(from, to uint64, size int) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: entryData(i, size)})
	}
	return logs
}

// storeBatches stores entries from..to through s, batch entries at a time.
func storeBatches(t *testing.T, s raft.LogStore, from, to uint64, size, batch int) {
	t.Helper()
	for i := from; i <= to; i += uint64(batch) {
		if err := s.StoreLogs(entries(i, min(i+uint64(batch)-1, to), size)); err != nil {
			t.Fatal(err)
		}
	}
}

// flipAll flips one bit, off bytes into every copy of needle, in the files
// matching glob (bbolt leaves stale copies of rewritten pages); it returns
// the files it changed.
func flipAll(t *testing.T, glob string, needle []byte, off int) []string {
	t.Helper()
	paths, _ := filepath.Glob(glob)
	var changed []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for at := 0; ; {
			i := bytes.Index(b[at:], needle)
			if i < 0 {
				break
			}
			b[at+i+off] ^= 0x04
			at += i + len(needle)
			n++
		}
		if n > 0 {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 {
		t.Fatalf("%q is in none of %s", needle, glob)
	}
	return changed
}

// testReplica is a replica with only what checkStores needs.
func testReplica(dataDir string, log *slog.Logger) *Replica {
	return &Replica{cfg: Config{DataDir: dataDir}, log: log, storeFailed: make(chan struct{})}
}

// Entries written through the checked store read back as written, with no
// Extensions; stable values round-trip; entries and values an older coord
// wrote (straight to the store) still read; absent keys answer as the
// store does, so raft's checks for a new directory still work.
func TestCheckedStoreRoundTrip(t *testing.T) {
	for _, kind := range LogStoreKinds {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, ls, ss, closer := openChecked(t, dir, kind, nil)
			has, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore())
			if err != nil || has {
				t.Fatalf("a new directory: existing state %v, %v", has, err)
			}
			if err := ls.StoreLogs(entries(1, 3, 40)); err != nil { // an older coord's
				t.Fatal(err)
			}
			if err := ss.SetUint64(keyCurrentTerm, 7); err != nil {
				t.Fatal(err)
			}
			if term, err := s.GetUint64(keyCurrentTerm); err != nil || term != 7 {
				t.Errorf("an older coord's term: %d, %v", term, err)
			}
			mine := entries(4, 6, 40)
			if err := s.StoreLogs(mine); err != nil {
				t.Fatal(err)
			}
			for _, l := range mine {
				if l.Extensions != nil {
					t.Fatalf("StoreLogs changed the caller's entry %d: %x", l.Index, l.Extensions)
				}
			}
			var raw raft.Log
			if err := ls.GetLog(5, &raw); err != nil || len(raw.Extensions) != entryRecordLen {
				t.Errorf("entry 5 as stored: extensions %x, %v; want a %d-byte record", raw.Extensions, err, entryRecordLen)
			}
			if err := s.SetUint64(keyCurrentTerm, 9); err != nil {
				t.Fatal(err)
			}
			if err := s.Set(keyLastVoteCand, []byte("s2")); err != nil {
				t.Fatal(err)
			}
			closer.Close()

			s, _, ss, closer = openChecked(t, dir, "", nil)
			defer closer.Close()
			if n, err := s.verify(); err != nil || n != 6 {
				t.Fatalf("verify: %d entries, %v", n, err)
			}
			for i := uint64(1); i <= 6; i++ {
				var l raft.Log
				if err := s.GetLog(i, &l); err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
				if l.Index != i || l.Term != 1 || l.Type != raft.LogCommand || !bytes.Equal(l.Data, entryData(i, 40)) || l.Extensions != nil {
					t.Errorf("entry %d read back as %+v", i, l)
				}
			}
			if err := s.GetLog(7, new(raft.Log)); err != raft.ErrLogNotFound {
				t.Errorf("entry 7: %v, want raft.ErrLogNotFound itself", err)
			}
			if term, err := s.GetUint64(keyCurrentTerm); err != nil || term != 9 {
				t.Errorf("term: %d, %v", term, err)
			}
			if cand, err := s.Get(keyLastVoteCand); err != nil || string(cand) != "s2" {
				t.Errorf("vote: %q, %v", cand, err)
			}
			// The plain keys too, for a coord that predates checked keys.
			if term, err := ss.GetUint64(keyCurrentTerm); err != nil || term != 9 {
				t.Errorf("the plain key of the term: %d, %v", term, err)
			}
			wantV, wantErr := ss.GetUint64([]byte("absent"))
			if v, err := s.GetUint64([]byte("absent")); v != wantV || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("absent key: %d, %v; the store says %d, %v", v, err, wantV, wantErr)
			}
			wantB, wantErr := ss.Get([]byte("absent"))
			if b, err := s.Get([]byte("absent")); !bytes.Equal(b, wantB) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("absent key: %q, %v; the store says %q, %v", b, err, wantB, wantErr)
			}
		})
	}
}

// Extensions the store does not own are refused, without failing the
// store; an entry that carries exactly its own record (sent by an older
// coord leader that did not strip it) is taken.
func TestCheckedStoreExtensions(t *testing.T) {
	mem := raft.NewInmemStore()
	var fails atomic.Int32
	s := newCheckedStore(mem, mem, "/data", LogStoreWAL, func(error) { fails.Add(1) })
	err := s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("a"), Extensions: []byte("theirs")}})
	if !errors.Is(err, ErrExtensionsInUse) {
		t.Fatalf("foreign extensions: %v", err)
	}
	stamped, err := stampEntries(entries(1, 2, 10))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(stamped); err != nil || fails.Load() != 0 {
		t.Fatalf("entries with their own records: %v (failures %d)", err, fails.Load())
	}
	var l raft.Log
	if err := s.GetLog(2, &l); err != nil || l.Extensions != nil {
		t.Errorf("entry 2: %+v, %v", l, err)
	}
}

// smallSegmentWAL writes entries 1..n of size bytes through a checked
// store over a raft-wal under dataDir whose segments are 64 KiB, so that
// most entries end up in sealed segments, which raft-wal reads unchecked.
func smallSegmentWAL(t *testing.T, dataDir string, n uint64, size int) {
	t.Helper()
	dir := filepath.Join(dataDir, "wal")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithMetaStore(meta), wal.WithSegmentSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	s := newCheckedStore(w, w, dataDir, LogStoreWAL, nil)
	if err := s.SetUint64(keyCurrentTerm, 1); err != nil {
		t.Fatal(err)
	}
	storeBatches(t, s, 1, n, size, 10)
	if err := errors.Join(w.Close(), meta.Close()); err != nil {
		t.Fatal(err)
	}
}

// A bit flipped in an entry's data on disk is found: GetLog refuses the
// entry naming the file that holds it (a sealed wal segment; raft.db) and
// fails the store, and the replica's open-time check refuses the
// directory. Read straight from the store, the same entry comes back
// changed and without an error: the checksum is what finds it (the test
// fails if verification is removed).
func TestCheckedStoreFindsFlippedEntry(t *testing.T) {
	const corrupt, size = 10, 1000
	for _, kind := range LogStoreKinds {
		t.Run(kind, func(t *testing.T) {
			dataDir := t.TempDir()
			glob := filepath.Join(dataDir, "raft.db")
			if kind == LogStoreWAL {
				smallSegmentWAL(t, dataDir, 300, size)
				glob = filepath.Join(dataDir, "wal", "*.wal")
			} else {
				s, _, _, closer := openChecked(t, dataDir, kind, nil)
				if err := s.SetUint64(keyCurrentTerm, 1); err != nil {
					t.Fatal(err)
				}
				storeBatches(t, s, 1, 300, size, 10)
				closer.Close()
			}
			changed := flipAll(t, glob, marker(corrupt), 5)
			if len(changed) != 1 {
				t.Fatalf("entry %d's data found in %v", corrupt, changed)
			}
			file := changed[0]
			if kind == LogStoreWAL {
				segs, _ := filepath.Glob(glob)
				if len(segs) < 3 || file != segs[0] {
					t.Fatalf("entry %d is in %s, not in the first of several segments %v", corrupt, file, segs)
				}
			}

			var fails []error
			s, raw, _, closer := openChecked(t, dataDir, "", func(err error) { fails = append(fails, err) })
			defer closer.Close()
			var l raft.Log
			if err := raw.GetLog(corrupt, &l); err != nil || bytes.Equal(l.Data, entryData(corrupt, size)) {
				t.Fatalf("planted check: read straight from the store, entry %d: %v, unchanged %v; want it changed, with no error", corrupt, err, bytes.Equal(l.Data, entryData(corrupt, size)))
			}
			want := fmt.Sprintf("raft log entry %d in %s fails its checksum: the file is corrupt", corrupt, file)
			err := s.GetLog(corrupt, &l)
			if !errors.Is(err, ErrCorrupt) || err.Error() != want {
				t.Fatalf("GetLog(%d) = %v, want %q", corrupt, err, want)
			}
			if err := s.GetLog(corrupt+1, &l); err != nil || !bytes.Equal(l.Data, entryData(corrupt+1, size)) {
				t.Errorf("entry %d: %v", corrupt+1, err)
			}
			if len(fails) != 1 || !errors.Is(fails[0], ErrCorrupt) {
				t.Errorf("failures reported: %v, want the corrupt entry once", fails)
			}
			if err := s.StoreLogs(entries(301, 301, 10)); !errors.Is(err, ErrStoreFailed) || !errors.Is(err, ErrCorrupt) {
				t.Errorf("a write after the corrupt entry was found: %v", err)
			}

			r := testReplica(dataDir, discardLog)
			_, err = r.checkStores(raw, s.stable, s.kind)
			wantOpen := "server: " + want + `; this server will not serve from it (see docs/deploy.md "A corrupt data directory")`
			if !errors.Is(err, ErrCorrupt) || err.Error() != wantOpen {
				t.Errorf("opening the directory: %v\nwant %s", err, wantOpen)
			}
			if r.StoreErr() != nil {
				t.Errorf("the open-time check reported a store failure: %v", r.StoreErr())
			}
		})
	}
}

// A flipped bit in a checked stable value is refused naming the file and
// the key; straight from the store the changed value reads without error.
func TestCheckedStoreFindsFlippedValue(t *testing.T) {
	const term = 0x0123456789abcdef
	sealed := []byte{recordV1, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	for _, kind := range LogStoreKinds {
		t.Run(kind, func(t *testing.T) {
			dataDir := t.TempDir()
			s, _, _, closer := openChecked(t, dataDir, kind, nil)
			if err := s.SetUint64(keyCurrentTerm, term); err != nil {
				t.Fatal(err)
			}
			storeBatches(t, s, 1, 5, 10, 5)
			closer.Close()
			changed := flipAll(t, s.stablePath, sealed, 4)

			s, _, ss, closer := openChecked(t, dataDir, "", nil)
			defer closer.Close()
			if b, err := ss.Get(checkedKey(keyCurrentTerm)); err != nil || bytes.HasPrefix(b, sealed) {
				t.Fatalf("planted check: read straight from the store: %x, %v; want it changed, with no error", b, err)
			}
			want := fmt.Sprintf("raft stable store %s: key CurrentTerm fails its checksum: the file is corrupt", changed[0])
			if _, err := s.GetUint64(keyCurrentTerm); !errors.Is(err, ErrCorrupt) || err.Error() != want {
				t.Errorf("GetUint64: %v, want %q", err, want)
			}
			r := testReplica(dataDir, discardLog)
			if _, err := r.checkStores(s.logs, ss, s.kind); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
				t.Errorf("opening the directory: %v", err)
			}
		})
	}
}

// A log with entries and no current term under either key is a stable
// store that lost it: refused, naming the file.
func TestCheckedStoreMissingTerm(t *testing.T) {
	for _, kind := range LogStoreKinds {
		t.Run(kind, func(t *testing.T) {
			s, _, _, closer := openChecked(t, t.TempDir(), kind, nil)
			defer closer.Close()
			storeBatches(t, s, 1, 4, 10, 4)
			want := fmt.Sprintf("raft stable store %s: key CurrentTerm is missing while the log holds entries 1..4: the file is corrupt", s.stablePath)
			if _, err := s.verify(); !errors.Is(err, ErrCorrupt) || err.Error() != want {
				t.Errorf("verify: %v, want %q", err, want)
			}
		})
	}
}

// faultyStore is an in-memory log and stable store whose writes fail with
// err while it is set, counting the writes that reach it.
type faultyStore struct {
	*raft.InmemStore
	mu     sync.Mutex
	err    error
	writes int
}

func (f *faultyStore) write(do func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.err != nil {
		return f.err
	}
	return do()
}

func (f *faultyStore) set(err error) (writes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	return f.writes
}

func (f *faultyStore) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }
func (f *faultyStore) StoreLogs(logs []*raft.Log) error {
	return f.write(func() error { return f.InmemStore.StoreLogs(logs) })
}
func (f *faultyStore) DeleteRange(min, max uint64) error {
	return f.write(func() error { return f.InmemStore.DeleteRange(min, max) })
}
func (f *faultyStore) Set(k, v []byte) error {
	return f.write(func() error { return f.InmemStore.Set(k, v) })
}
func (f *faultyStore) SetUint64(k []byte, v uint64) error {
	return f.write(func() error { return f.InmemStore.SetUint64(k, v) })
}

const segmentPath = "/data/wal/00000000000000000001-0000000000000000.wal"

// The first write that fails (an fsync's EIO) fails the store for good: it
// is reported once, that write's error names the store and says why, and
// every later write is refused without reaching the store, even once the
// disk answers again. A full disk (ENOSPC, EDQUOT) stays retryable.
func TestCheckedStoreFailStop(t *testing.T) {
	f := &faultyStore{InmemStore: raft.NewInmemStore()}
	var reported []error
	s := newCheckedStore(f, f, "/data", LogStoreWAL, func(err error) { reported = append(reported, err) })
	if err := s.StoreLogs(entries(1, 2, 10)); err != nil {
		t.Fatal(err)
	}

	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		f.set(&os.PathError{Op: "write", Path: segmentPath, Err: errno})
		if err := s.StoreLogs(entries(3, 3, 10)); !errors.Is(err, errno) || errors.Is(err, ErrStoreFailed) {
			t.Errorf("%v: %v", errno, err)
		}
		if err := s.SetUint64(keyCurrentTerm, 2); !errors.Is(err, errno) || errors.Is(err, ErrStoreFailed) {
			t.Errorf("%v, stable store: %v", errno, err)
		}
	}
	f.set(nil)
	if err := s.StoreLogs(entries(3, 3, 10)); err != nil || len(reported) != 0 {
		t.Fatalf("after a full disk was freed: %v (reported %v)", err, reported)
	}

	f.set(&os.PathError{Op: "sync", Path: segmentPath, Err: syscall.EIO})
	err := s.StoreLogs(entries(4, 4, 10))
	want := "raft log store /data/wal: write failed: sync " + segmentPath + ": input/output error; stopping: a failed fsync may have lost data the disk reported written"
	if err == nil || err.Error() != want || !errors.Is(err, ErrStoreFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("the failed write: %v\nwant %s", err, want)
	}
	if len(reported) != 1 || reported[0] != err {
		t.Fatalf("reported %v, want the failed write's error once", reported)
	}

	writes := f.set(nil) // the disk answers again: too late
	for name, write := range map[string]func() error{
		"StoreLogs":   func() error { return s.StoreLogs(entries(4, 4, 10)) },
		"StoreLog":    func() error { return s.StoreLog(entries(4, 4, 10)[0]) },
		"DeleteRange": func() error { return s.DeleteRange(1, 1) },
		"Set":         func() error { return s.Set(keyLastVoteCand, []byte("s1")) },
		"SetUint64":   func() error { return s.SetUint64(keyCurrentTerm, 3) },
	} {
		err := write()
		if !errors.Is(err, ErrStoreFailed) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "the store failed earlier (raft log store /data/wal: write failed: sync") {
			t.Errorf("%s after the failure: %v", name, err)
		}
	}
	if got := f.set(nil); got != writes {
		t.Errorf("%d writes reached the store after it failed", got-writes)
	}
	if len(reported) != 1 {
		t.Errorf("reported %d times", len(reported))
	}
	var l raft.Log
	if err := s.GetLog(3, &l); err != nil || l.Index != 3 {
		t.Errorf("reading after the failure: %+v, %v", l, err)
	}
}

// A failed stable store write names the stable store's file, and fails
// the log store too (one store, one disk).
func TestCheckedStoreStableWriteFails(t *testing.T) {
	f := &faultyStore{InmemStore: raft.NewInmemStore()}
	var reported atomic.Int32
	s := newCheckedStore(f, f, "/data", LogStoreWAL, func(error) { reported.Add(1) })
	f.set(&os.PathError{Op: "sync", Path: "/data/wal/wal-meta.db", Err: syscall.EIO})
	err := s.SetUint64(keyCurrentTerm, 2)
	if want := "raft stable store /data/wal/wal-meta.db: write failed: sync /data/wal/wal-meta.db: input/output error; stopping:"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("the failed write: %v\nwant %s...", err, want)
	}
	f.set(nil)
	if err := s.StoreLogs(entries(1, 1, 10)); !errors.Is(err, ErrStoreFailed) || reported.Load() != 1 {
		t.Errorf("a log write after the stable store failed: %v (reported %d)", err, reported.Load())
	}
}

// Writes failing at once on many goroutines report the failure once.
func TestCheckedStoreFailsOnce(t *testing.T) {
	f := &faultyStore{InmemStore: raft.NewInmemStore()}
	var reported atomic.Int32
	s := newCheckedStore(f, f, "/data", LogStoreBolt, func(error) { reported.Add(1) })
	f.set(syscall.EIO)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				s.SetUint64(keyCurrentTerm, uint64(i))
			} else {
				s.StoreLogs(entries(uint64(i), uint64(i), 10))
			}
		}()
	}
	wg.Wait()
	if reported.Load() != 1 {
		t.Errorf("reported %d times", reported.Load())
	}
}

// Once the replica closes its stores, a write raft still tries fails on
// its own: no disk fault, nothing reported.
func TestCheckedStoreClosedIsNoFault(t *testing.T) {
	f := &faultyStore{InmemStore: raft.NewInmemStore()}
	var reported atomic.Int32
	s := newCheckedStore(f, f, "/data", LogStoreWAL, func(error) { reported.Add(1) })
	s.closed.Store(true)
	f.set(errors.New("closed"))
	if err := s.StoreLogs(entries(1, 1, 10)); err == nil || errors.Is(err, ErrStoreFailed) || reported.Load() != 0 {
		t.Errorf("a write after close: %v (reported %d)", err, reported.Load())
	}
}

// recordingHandler keeps the records logged through it.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// The replica logs a store failure at Error inside the failing call, before
// raft has the error (it may panic on it: a failed term write), and
// exposes it on StoreFailed and StoreErr.
func TestReplicaReportsStoreFailure(t *testing.T) {
	h := &recordingHandler{}
	r := testReplica("/data", slog.New(h))
	f := &faultyStore{InmemStore: raft.NewInmemStore()}
	s := newCheckedStore(f, f, "/data", LogStoreWAL, r.storeFailedNow)
	if r.StoreErr() != nil {
		t.Fatal("failed before any write")
	}
	f.set(&os.PathError{Op: "sync", Path: "/data/wal/wal-meta.db", Err: syscall.EIO})
	err := s.SetUint64(keyCurrentTerm, 2)
	h.mu.Lock()
	logged := len(h.records) == 1 && h.records[0].Level == slog.LevelError
	h.mu.Unlock()
	if !logged {
		t.Errorf("when the failed write returned, the log held %v", h.records)
	}
	select {
	case <-r.StoreFailed():
	default:
		t.Fatal("StoreFailed is not closed")
	}
	if r.StoreErr() != err || !errors.Is(r.StoreErr(), syscall.EIO) {
		t.Errorf("StoreErr = %v, want %v", r.StoreErr(), err)
	}
}

// The open-time check reads the whole log: its cost, for 20,000 entries
// of 256 bytes and of 1 KiB, is logged (go test -v -run ScanCost) as the
// time a restart spends on it. Under the race detector (ten times slower
// here, and no measure of anything) or -short, 2,000 entries.
func TestCheckedStoreScanCost(t *testing.T) {
	n := uint64(20000)
	if testing.Short() || raceBuild() {
		n = 2000
	}
	for _, kind := range LogStoreKinds {
		for _, size := range []int{256, 1024} {
			t.Run(fmt.Sprintf("%s/%d", kind, size), func(t *testing.T) {
				dataDir := t.TempDir()
				s, _, _, closer := openChecked(t, dataDir, kind, nil)
				if err := s.SetUint64(keyCurrentTerm, 1); err != nil {
					t.Fatal(err)
				}
				storeBatches(t, s, 1, n, size, 500)
				closer.Close()

				s, _, _, closer = openChecked(t, dataDir, "", nil)
				defer closer.Close()
				start := time.Now()
				got, err := s.verify()
				took := time.Since(start)
				if err != nil || got != n {
					t.Fatalf("verify: %d entries, %v", got, err)
				}
				t.Logf("%s: verified %d entries of %d bytes (%.1f MB of entry data) in %v", kind, n, size, float64(n)*float64(size)/1e6, took.Round(time.Millisecond))
			})
		}
	}
}

// raceBuild reports whether the test binary runs under the race detector.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// raft names no file when no snapshot it holds loads; snapshotsUnreadable
// names each one that does not verify. Before the flip all open.
func TestSnapshotsUnreadableNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("a")
	sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 2, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("the state of the tree at index 10")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := snapshotsUnreadable(dir, snaps); err != nil {
		t.Fatalf("an intact snapshot: %v", err)
	}
	state := filepath.Join(dir, "snapshots", sink.ID(), "state.bin")
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	b[4] ^= 0x10
	if err := os.WriteFile(state, b, 0o644); err != nil {
		t.Fatal(err)
	}
	want := "snapshot " + state + " does not verify (CRC mismatch): the file is corrupt; this server will not serve from it (" + corruptHelp + ")"
	// raft's store checks as it opens, the replica's as it reads.
	for _, s := range []raft.SnapshotStore{snaps, newDurableSnapshots(snaps, dir)} {
		err = snapshotsUnreadable(dir, s)
		if err == nil || err.Error() != want || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%T, after a flipped bit: %v\nwant %s", s, err, want)
		}
	}
}

// An empty snapshot directory (its files lost to a power loss before they
// were durable) is removed at start; one with anything in it stays.
func TestRemoveEmptySnapshots(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "snapshots", "3-100-1")
	kept := filepath.Join(dir, "snapshots", "3-200-2")
	tmp := filepath.Join(dir, "snapshots", "3-300-3.tmp")
	for _, d := range []string{empty, kept, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(kept, "state.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	removeEmptySnapshots(dir, slog.New(slog.DiscardHandler))
	if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the empty snapshot directory is still there: %v", err)
	}
	for _, d := range []string{kept, tmp} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}
