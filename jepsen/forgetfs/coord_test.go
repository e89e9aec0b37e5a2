package forgetfs

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/internal/freeport"
)

// A coord server whose data directory is on forgetfs loses no
// acknowledged write when it loses power: it is killed mid-write (kill -9),
// everything it did not fsync is undone (half the rounds tearing the last
// write), and it restarts on what is left. Before coord synced its data
// directory, the first power loss took wal/ and snapshots/ (entries no
// fsync had made durable) and with them every acknowledged write.
func TestCoordLosesNothingAcknowledgedOnPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("builds coord and runs it through power losses")
	}
	f, mnt, _ := mount(t)
	bin := filepath.Join(t.TempDir(), "coord")
	if out, err := exec.Command("go", "build", "-o", bin, "coord/cmd/coord").CombinedOutput(); err != nil {
		t.Fatalf("building coord: %v\n%s", err, out)
	}
	addrs, err := freeport.Addrs(4)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "coord.log")
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-id", "s1", "-data-dir", mnt, "-raft-addr", addrs[0], "-grpc-addr", addrs[1],
			"-gossip-addr", "", "-http-addr", addrs[2], "-zk-addr", addrs[3])
		log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	connect := func(round int) *zk.Conn {
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, _, err := zk.Connect([]string{addrs[3]}, 5*time.Second, zk.WithLogInfo(false))
			if err == nil {
				if _, _, err = c.Get("/"); err == nil {
					return c
				}
				c.Close()
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(logPath)
				t.Fatalf("round %d: the restarted server does not answer: %v\n%s", round, err, b[max(0, len(b)-3000):])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[string]bool{}
	for round := 0; round < 4; round++ {
		cmd := start()
		c := connect(round)
		missing := 0
		for p := range acked {
			if ok, _, err := c.Exists(p); err != nil || !ok {
				missing++
			}
		}
		if missing > 0 {
			t.Fatalf("round %d: %d of %d acknowledged znodes lost in the power losses", round, missing, len(acked))
		}
		// Write, and kill the server in the middle of the writes.
		go func() {
			time.Sleep(time.Duration(200+r.Intn(400)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
		}()
		for i := 0; ; i++ {
			p := fmt.Sprintf("/r%d-%d", round, i)
			if _, err := c.Create(p, make([]byte, 100), 0, zk.WorldACL(zk.PermAll)); err != nil {
				break
			}
			acked[p] = true
		}
		cmd.Wait()
		c.Close()
		lost, err := f.PowerLoss(Loss{Torn: round%2 == 1, Rand: r})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d znodes acknowledged so far; the power loss undid %d unsynced changes (torn: %q)", round, len(acked), lost.Undone, lost.Torn)
		if err := f.Remount(); err != nil {
			t.Fatal(err)
		}
	}
}
