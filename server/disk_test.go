package server

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coord/fsm"
)

// Below MinFreeDisk a server refuses writes with an error, keeps serving
// reads and the session, and accepts writes again once space is back.
func TestDiskLowRefusesWrites(t *testing.T) {
	c := NewTestCluster(t, 1, 0)
	srv := c.Servers[0]
	s := newSession(t, srv.GRPCAddr())
	mustOK(t, s.create("/before", "", fsm.ModePersistent))
	srv.cfg.MinFreeDisk = math.MaxUint64
	srv.checkDisk()
	if r := s.create("/during", "", fsm.ModePersistent); fsm.Code(r.Err) != fsm.SystemError {
		t.Fatalf("write on a full disk: %v", fsm.Code(r.Err))
	}
	mustOK(t, s.get("/before", false))
	if r := s.get("/during", false); fsm.Code(r.Err) != fsm.NoNode {
		t.Fatalf("refused write left %v", r)
	}
	srv.cfg.MinFreeDisk = 0
	srv.checkDisk()
	mustOK(t, s.create("/after", "", fsm.ModePersistent))
}

// A write through a follower that the leader refuses for its disk gets the
// same answer, and the connection stays: the refusal crosses the forward
// as a flag, not as a string to compare.
func TestLeaderDiskLowRefusesForwardedWrites(t *testing.T) {
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	leader := c.Servers[li]
	s := newSession(t, c.Servers[(li+1)%3].GRPCAddr())
	mustOK(t, s.create("/before", "", fsm.ModePersistent))
	leader.cfg.MinFreeDisk = math.MaxUint64
	leader.checkDisk()
	if r := s.create("/during", "", fsm.ModePersistent); fsm.Code(r.Err) != fsm.SystemError {
		t.Fatalf("forwarded write to a leader with a full disk: %v", fsm.Code(r.Err))
	}
	mustOK(t, s.get("/before", false)) // same connection
	leader.cfg.MinFreeDisk = 0
	leader.checkDisk()
	mustOK(t, s.create("/after", "", fsm.ModePersistent))
}

// On a real, small filesystem that fills up, the server refuses writes
// before raft runs out of space, and every acknowledged write survives a
// restart. Needs root to mount a tmpfs; skipped otherwise.
func TestDiskFillsUp(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	cfg := TestConfig(t, "s1")
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Bootstrap = true
	cfg.MinFreeDisk = 12 << 20
	cfg.DiskCheckInterval = 5 * time.Millisecond
	c := &TestCluster{tb: t}
	srv := c.start(cfg)
	c.Leader()
	s := newSession(t, srv.GRPCAddr())
	blob := strings.Repeat("x", 256<<10)
	acked := 0
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("the disk never filled")
		}
		r := s.create(fmt.Sprintf("/blob%04d", i), blob, fsm.ModePersistent)
		if r.Err != 0 {
			if fsm.Code(r.Err) != fsm.SystemError {
				t.Fatalf("write %d on a filling disk: %v", i, fsm.Code(r.Err))
			}
			break
		}
		acked++
	}
	t.Logf("%d writes of 256 KiB acknowledged before the server refused", acked)
	if acked < 10 {
		t.Fatalf("only %d writes fit", acked)
	}
	srv = c.Restart(0)
	c.Leader()
	// The log is replayed once the restarted server commits in its new
	// term: a barrier through the log waits for that.
	if err := srv.raft.Barrier(10 * time.Second).Error(); err != nil {
		t.Fatalf("barrier after restart: %v", err)
	}
	v := srv.View()
	for i := 0; i < acked; i++ {
		if _, err := v.Exists(fmt.Sprintf("/blob%04d", i)); err != nil {
			t.Fatalf("acknowledged /blob%04d lost after restart: %v", i, err)
		}
	}
}
