package jepsen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestRebuildCommand: a voter whose log does not verify refuses to start
// naming the file, and `coord -rebuild` (the one command docs/deploy.md
// gives) sets its raft state aside, starts it empty and has the leader
// remove it and add it back: it serves every znode again, as a voter. Run
// again with -rebuild on a state that verifies, it refuses.
func TestRebuildCommand(t *testing.T) {
	powerTests(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := BuildCoord(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("a value only this znode holds: 7f3a9c")
	c := threeVotersHolding(ctx, t, bin, nil, payload)
	const target = 2
	c.Kill(target)
	flipped := flipPayload(t, c.DataDir(target), payload)
	since := logSize(c.LogPath(target))
	if err := c.Start(target); err != nil {
		t.Fatal(err)
	}
	for c.Running(target) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	why := stopReason(logSince(c.LogPath(target), since))
	if !strings.Contains(why, "fails its checksum") || !strings.Contains(why, flipped) {
		t.Fatalf("s3 on a flipped log: %q, want a refusal naming %s", why, flipped)
	}
	t.Logf("refused: %s", why)

	t0 := time.Now()
	if err := c.rebuild(ctx, target); err != nil {
		t.Fatal(err)
	}
	t.Logf("rebuilt in %v", time.Since(t0).Round(time.Millisecond))
	removed := false
	for i := 0; i < c.Size(); i++ {
		b, _ := os.ReadFile(c.LogPath(i))
		removed = removed || strings.Contains(string(b), `msg="removing a voter that lost its raft state, to add it back empty" server=`+c.ID(i)+" id=s3")
	}
	if !removed {
		t.Errorf("no leader says it removed s3 to add it back empty")
	}
	aside, _ := filepath.Glob(filepath.Join(c.DataDir(target), "corrupt-*", "wal", "*.wal"))
	if len(aside) == 0 {
		t.Errorf("the corrupt log was not kept in corrupt-*/wal")
	}
	one, _, err := zk.Connect([]string{c.Addr(target)}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	for _, p := range []string{"/a", "/b", "/c"} {
		got, _, err := one.Get(p)
		if err != nil || !bytes.Equal(got, payload) {
			t.Errorf("s3 after the rebuild: %s = %q, %v", p, got, err)
		}
	}

	// -rebuild on a state that verifies throws nothing away.
	c.Kill(target)
	since = logSize(c.LogPath(target))
	if err := c.startWith(target, func(args []string) []string { return append(args, "-rebuild") }); err != nil {
		t.Fatal(err)
	}
	for c.Running(target) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	if why := stopReason(logSince(c.LogPath(target), since)); !strings.Contains(why, "verifies; -rebuild is only for a data directory that does not") {
		t.Errorf("-rebuild on a good data directory: %q", why)
	}
}

// flipPayload flips one bit of payload where a wal segment under dataDir
// holds it, and returns the segment.
func flipPayload(t *testing.T, dataDir string, payload []byte) string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dataDir, "wal", "*.wal"))
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if k := bytes.Index(b, payload); k >= 0 {
			b[k+3] ^= 0x04
			if err := os.WriteFile(seg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return seg
		}
	}
	t.Fatalf("no segment under %s holds the payload (%v)", dataDir, segs)
	return ""
}

// threeVotersHolding starts 3 voters (closed when t ends), creates /a, /b
// and /c holding payload and waits until s3 has applied them.
func threeVotersHolding(ctx context.Context, t *testing.T, bin string, env []string, payload []byte) *Cluster {
	t.Helper()
	c, err := StartCluster(ctx, ClusterConfig{Bin: bin, Dir: t.TempDir(), Voters: 3, Env: env, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	conn, _, err := zk.Connect(c.Addrs(), 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, p := range []string{"/a", "/b", "/c"} {
		if _, err := conn.Create(p, payload, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	one, _, err := zk.Connect([]string{c.Addr(2)}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if _, err := one.Sync("/c"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := one.Exists("/c"); err != nil || !ok {
		t.Fatalf("s3 does not hold /c: %v", err)
	}
	return c
}
