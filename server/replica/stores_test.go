package replica

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// A data directory keeps the log store it was made with: "" reopens it,
// the other kind is refused with an error that names both, and each store
// reads back what it was given.
func TestLogStoreKinds(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, kind := range LogStoreKinds {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			ls, ss, closer, got, err := openLogStore(dir, kind, log)
			if err != nil || got != kind {
				t.Fatalf("open %s: kind %q, %v", kind, got, err)
			}
			if err := ls.StoreLogs([]*raft.Log{{Index: 1, Term: 3, Type: raft.LogCommand, Data: []byte("one")}, {Index: 2, Term: 3, Type: raft.LogCommand, Data: []byte("two")}}); err != nil {
				t.Fatal(err)
			}
			if err := ss.SetUint64([]byte("CurrentTerm"), 3); err != nil {
				t.Fatal(err)
			}
			closer.Close()
			if LogStoreBytes(dir) == 0 {
				t.Errorf("LogStoreBytes(%s) = 0 after two entries", kind)
			}

			ls, ss, closer, got, err = openLogStore(dir, "", log)
			if err != nil || got != kind {
				t.Fatalf("reopen with no kind: %q, %v", got, err)
			}
			var l raft.Log
			if err := ls.GetLog(2, &l); err != nil || string(l.Data) != "two" || l.Term != 3 {
				t.Errorf("entry 2 after reopening: %+v %v", l, err)
			}
			if last, err := ls.LastIndex(); err != nil || last != 2 {
				t.Errorf("last index %d %v, want 2", last, err)
			}
			if term, err := ss.GetUint64([]byte("CurrentTerm")); err != nil || term != 3 {
				t.Errorf("current term %d %v, want 3", term, err)
			}
			closer.Close()

			other := LogStoreWAL
			if kind == LogStoreWAL {
				other = LogStoreBolt
			}
			if _, _, _, _, err := openLogStore(dir, other, log); err == nil || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), other) {
				t.Errorf("opening a %s directory as %s: %v", kind, other, err)
			}
		})
	}
	t.Run("both", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "raft.db"), nil, 0o600)
		os.Mkdir(filepath.Join(dir, "wal"), 0o700)
		if _, _, _, _, err := openLogStore(dir, "", log); err == nil {
			t.Error("a directory with both stores opened")
		}
	})
	t.Run("unknown", func(t *testing.T) {
		if _, _, _, _, err := openLogStore(t.TempDir(), "rocks", log); err == nil || !strings.Contains(err.Error(), "rocks") {
			t.Errorf("unknown kind: %v", err)
		}
	})
}

// Raft truncates a follower's log tail when it conflicts with the
// leader's (DeleteRange up to the last index). raft-wal v0.4.0 marked the
// tail segment sealed without writing its index block, so the next start
// failed with "sealed segment has no index block" and the server could
// never start again (hashicorp/raft-wal#31, fixed in v0.4.1; found by a
// jepsen run with kills). The store must reopen after a tail truncation
// and serve every entry it kept.
func TestWALReopensAfterTailTruncation(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	ls, _, closer, _, err := openLogStore(dir, LogStoreWAL, log)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := ls.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := ls.DeleteRange(8, 10); err != nil { // a conflicting suffix
		t.Fatal(err)
	}
	if err := ls.StoreLogs([]*raft.Log{{Index: 8, Term: 2, Type: raft.LogCommand, Data: []byte{80}}}); err != nil {
		t.Fatal(err)
	}
	closer.Close()

	ls, _, closer, _, err = openLogStore(dir, LogStoreWAL, log)
	if err != nil {
		t.Fatalf("reopening after a tail truncation: %v", err)
	}
	defer closer.Close()
	for i := uint64(1); i <= 8; i++ {
		var l raft.Log
		if err := ls.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d after reopening: %v", i, err)
		}
		if want := byte(i); i == 8 && (l.Term != 2 || l.Data[0] != 80) || i < 8 && l.Data[0] != want {
			t.Errorf("entry %d after reopening: %+v", i, l)
		}
	}
	if last, err := ls.LastIndex(); err != nil || last != 8 {
		t.Errorf("last index %d %v, want 8", last, err)
	}
}

// raft asks the log store it is given whether it refuses gaps; coord's
// wrappers (the log cache, the applier's kick) must pass raft-wal's yes
// through, or a follower that installs a snapshot keeps a log whose next
// append leaves a gap, which raft-wal refuses.
func TestWrappedStoreKeepsMonotonic(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for kind, want := range map[string]bool{LogStoreWAL: true, LogStoreBolt: false} {
		ls, _, closer, _, err := openLogStore(t.TempDir(), kind, log)
		if err != nil {
			t.Fatal(err)
		}
		cache, err := raft.NewLogCache(16, ls)
		if err != nil {
			t.Fatal(err)
		}
		// As startRaft hands it to raft: the startup scan's answers
		// outermost.
		for _, wrapped := range []raft.LogStore{
			kickingLogStore{LogStore: cache, fsm: &raftFSM{}},
			armStartupScan(kickingLogStore{LogStore: cache, fsm: &raftFSM{}}, newLogTypes(1, 10)),
		} {
			m, ok := wrapped.(raft.MonotonicLogStore)
			if got := ok && m.IsMonotonic(); got != want {
				t.Errorf("%s: monotonic as raft sees it through %T = %v, want %v", kind, wrapped, got, want)
			}
		}
		closer.Close()
	}
}
