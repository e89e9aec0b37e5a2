package server

import (
	"coord/vocab"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Below MinFreeDisk a server refuses writes with an error, keeps serving
// reads and the session, and accepts writes again once space is back.
func TestDiskLowRefusesWrites(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	srv := c.Servers[0]
	s := newSession(t, srv.GRPCAddr())
	mustOK(t, s.create("/before", "", vocab.ModePersistent))
	srv.minFreeDisk.Store(math.MaxUint64)
	srv.checkDisk()
	if r := s.create("/during", "", vocab.ModePersistent); vocab.Code(r.Err) != vocab.SystemError {
		t.Fatalf("write on a full disk: %v", vocab.Code(r.Err))
	}
	mustOK(t, s.get("/before", false))
	if r := s.get("/during", false); vocab.Code(r.Err) != vocab.NoNode {
		t.Fatalf("refused write left %v", r)
	}
	srv.minFreeDisk.Store(0)
	srv.checkDisk()
	mustOK(t, s.create("/after", "", vocab.ModePersistent))
}

// A write through a follower that the leader refuses for its disk gets the
// same answer, and the connection stays: the refusal crosses the forward
// as a flag, not as a string to compare.
func TestLeaderDiskLowRefusesForwardedWrites(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	leader := c.Servers[li]
	s := newSession(t, c.Servers[(li+1)%3].GRPCAddr())
	mustOK(t, s.create("/before", "", vocab.ModePersistent))
	leader.minFreeDisk.Store(math.MaxUint64)
	leader.checkDisk()
	if r := s.create("/during", "", vocab.ModePersistent); vocab.Code(r.Err) != vocab.SystemError {
		t.Fatalf("forwarded write to a leader with a full disk: %v", vocab.Code(r.Err))
	}
	mustOK(t, s.get("/before", false)) // same connection
	leader.minFreeDisk.Store(0)
	leader.checkDisk()
	mustOK(t, s.create("/after", "", vocab.ModePersistent))
}

// On a real, small filesystem that fills up, the server refuses writes
// before raft runs out of space, and every acknowledged write survives a
// restart. Needs root to mount a tmpfs; skipped otherwise.
func TestDiskFillsUp(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, kind := range []string{"wal", "bolt"} {
		t.Run(kind, func(t *testing.T) { testDiskFillsUp(t, kind) })
	}
}

func testDiskFillsUp(t *testing.T, kind string) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	cfg := testConfig(t, "s1")
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.LogStore = kind
	// No snapshot by log bytes. A CI run saw one taken at the restart take
	// the space the next log append needed, and the leader step down; a
	// snapshot that does not fit is now skipped (replica's
	// TestSnapshotFits), but with snapshots on, the bolt run still lost
	// leadership after the restart ("node is not the leader" at the
	// barrier) about once in ten runs, for a cause not yet found (it did
	// not happen with the server's log on). Known gap; not what this tests.
	cfg.SnapshotLogBytes = 0
	cfg.Bootstrap = true
	cfg.MinFreeDisk = 12 << 20 // below the wal's 16 MiB segment: the segment decides
	cfg.DiskCheckInterval = 5 * time.Millisecond
	c := emptyCluster(t)
	srv := c.Start(cfg)
	c.Leader()
	s := newSession(t, srv.GRPCAddr())
	blob := strings.Repeat("x", 256<<10)
	acked := 0
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("the disk never filled")
		}
		r := s.create(fmt.Sprintf("/blob%04d", i), blob, vocab.ModePersistent)
		if r.Err != 0 {
			if vocab.Code(r.Err) != vocab.SystemError {
				t.Fatalf("write %d on a filling disk: %v", i, vocab.Code(r.Err))
			}
			break
		}
		acked++
	}
	t.Logf("%d writes of 256 KiB acknowledged before the server refused", acked)
	if acked < 10 {
		t.Fatalf("only %d writes fit", acked)
	}
	// Whether a snapshot came due while the disk was nearly full depends
	// on timing; replica's TestSnapshotFits checks the rule itself.
	t.Logf("%d snapshots taken, %d skipped for want of space while the disk filled",
		srv.rep.SnapshotStats().Taken, srv.rep.SnapshotStats().SkippedNoSpace)
	srv = c.Restart(0)
	c.Leader()
	// The log is replayed once the restarted server commits in its new
	// term: a barrier through the log waits for that.
	if err := srv.rep.Barrier(10 * time.Second); err != nil {
		t.Fatalf("barrier after restart: %v", err)
	}
	v := srv.View()
	for i := 0; i < acked; i++ {
		if _, err := v.Exists(fmt.Sprintf("/blob%04d", i)); err != nil {
			t.Fatalf("acknowledged /blob%04d lost after restart: %v", i, err)
		}
	}
}
