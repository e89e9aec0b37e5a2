package replica

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/hashicorp/raft"
)

// writeSnapshot writes state as a snapshot through raft's file store and
// returns the store wrapped as the replica wraps it, and the state file.
func writeSnapshot(t *testing.T, state []byte) (*durableSnapshots, string) {
	t.Helper()
	dir := t.TempDir()
	fss, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	snaps := newDurableSnapshots(fss, dir)
	_, trans := raft.NewInmemTransport("a")
	sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 2, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(state); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return snaps, filepath.Join(dir, "snapshots", sink.ID(), "state.bin")
}

// A snapshot's CRC is checked while it is read: an intact one reads back
// whole with its meta; one with a flipped byte anywhere reads back all but
// its last byte, then fails with raft's "CRC mismatch", and raft's own
// store refuses it too.
func TestSnapshotCheckedWhileRead(t *testing.T) {
	state := make([]byte, 3<<20+17) // more than one of the check's reads
	rand.New(rand.NewSource(1)).Read(state)
	for _, flip := range []int{-1, 0, len(state) / 2, len(state) - 1} {
		snaps, file := writeSnapshot(t, state)
		if flip >= 0 {
			b := bytes.Clone(state)
			b[flip] ^= 0x40
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		list, err := snaps.List()
		if err != nil || len(list) != 1 {
			t.Fatalf("list: %v %v", list, err)
		}
		meta, rc, err := snaps.Open(list[0].ID)
		if err != nil {
			t.Fatalf("flip %d: open: %v", flip, err)
		}
		if meta.Index != 10 || meta.Term != 2 || meta.Size != int64(len(state)) {
			t.Errorf("flip %d: meta %+v", flip, meta)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if flip < 0 {
			if err != nil || !bytes.Equal(got, state) {
				t.Fatalf("intact snapshot: %d of %d bytes, err %v", len(got), len(state), err)
			}
			continue
		}
		if !errors.Is(err, errSnapshotCRC) || len(got) != len(state)-1 {
			t.Errorf("byte %d flipped: read %d of %d bytes, err %v; want all but the last and %v", flip, len(got), len(state), err, errSnapshotCRC)
		}
		if _, _, err := snaps.FileSnapshotStore.Open(list[0].ID); err == nil || err.Error() != errSnapshotCRC.Error() {
			t.Errorf("byte %d flipped: raft's store: %v", flip, err)
		}
	}
}

// A state file shorter than when it was opened is an error, not a short
// snapshot; closing a reader early stops its check.
func TestSnapshotCheckedShrinkAndClose(t *testing.T) {
	state := bytes.Repeat([]byte("coord"), 1<<20)
	snaps, file := writeSnapshot(t, state)
	list, _ := snaps.List()
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, int64(len(state)/2)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); err == nil {
		t.Fatal("a state file that shrank read back without an error")
	}
	rc.Close()

	snaps, _ = writeSnapshot(t, state)
	list, _ = snaps.List()
	_, rc, err = snaps.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	c := rc.(*checkedSnapshot)
	rc.Close()
	if err := <-c.verdict; err == nil {
		// The check may have ended before the close; it must end either way.
		t.Log("the check ended before the close")
	}
}

// Restores at once (servers in one process) keep the collector off until
// the last ends, then put back the setting found.
func TestSuspendCollectorNests(t *testing.T) {
	old := debug.SetGCPercent(173)
	defer debug.SetGCPercent(old)
	r1 := suspendCollector()
	r2 := suspendCollector()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("collector at %d during two restores, want off", p)
	}
	r1()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("collector at %d with one restore still running, want off", p)
	}
	r2()
	if p := debug.SetGCPercent(173); p != 173 {
		t.Fatalf("collector at %d after both restores, want 173 back", p)
	}
}
