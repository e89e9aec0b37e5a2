package forgetfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mount mounts a forgetfs over a fresh backing directory, or skips the
// test where FUSE cannot be mounted (no /dev/fuse, not root).
func mount(t *testing.T) (*FS, string, string) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE directly needs root")
	}
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(mnt, backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Unmount() })
	return f, mnt, backing
}

func write(t *testing.T, p string, data string, sync bool) {
	t.Helper()
	fd, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fd.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := fd.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, p string) {
	t.Helper()
	d, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, p, data string, sync bool) {
	t.Helper()
	fd, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if _, err := fd.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := fd.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// content is the file's content in the backing directory ("<none>" if
// it does not exist).
func content(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func powerLoss(t *testing.T, f *FS, l Loss) Lost {
	t.Helper()
	lost, err := f.PowerLoss(l)
	if err != nil {
		t.Fatal(err)
	}
	return lost
}

// A write not fsynced is gone after a power loss, a synced one survives;
// a new file's name survives only if its directory was fsynced.
func TestUnsyncedWritesAreLost(t *testing.T) {
	f, mnt, backing := mount(t)
	write(t, filepath.Join(mnt, "synced"), "durable", true)
	syncDir(t, mnt)
	appendTo(t, filepath.Join(mnt, "synced"), " and more", false)
	write(t, filepath.Join(mnt, "nameless"), "data synced, name not", true)
	write(t, filepath.Join(mnt, "never"), "never synced", false)
	if got := content(t, filepath.Join(mnt, "synced")); got != "durable and more" {
		t.Fatalf("through the mount before the loss: %q", got)
	}
	if f.Unsynced() == 0 {
		t.Fatal("no unsynced changes recorded")
	}
	powerLoss(t, f, Loss{})
	for name, want := range map[string]string{"synced": "durable", "nameless": "<none>", "never": "<none>"} {
		if got := content(t, filepath.Join(backing, name)); got != want {
			t.Errorf("%s after the power loss: %q, want %q", name, got, want)
		}
	}
	// Mounted again, the server sees what is left, and new writes count
	// from there.
	if err := f.Remount(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, filepath.Join(mnt, "synced")); got != "durable" {
		t.Fatalf("through the mount after the loss: %q", got)
	}
}

// A rename, an unlink and a truncation without the fsyncs that make them
// durable are undone: the old name is back, the replaced target is back
// with its content, the removed file is back, the truncated bytes too.
func TestUnsyncedRenamesAndUnlinksAreUndone(t *testing.T) {
	f, mnt, backing := mount(t)
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(mnt, "d", "current"), "old state", true)
	write(t, filepath.Join(mnt, "d", "gone"), "removed later", true)
	write(t, filepath.Join(mnt, "d", "short"), "0123456789", true)
	syncDir(t, filepath.Join(mnt, "d"))
	syncDir(t, mnt)
	// The pattern a snapshot uses: write a temporary file, fsync it,
	// rename it over the current one, and (here) no fsync of the
	// directory.
	write(t, filepath.Join(mnt, "d", "current.tmp"), "new state", true)
	if err := os.Rename(filepath.Join(mnt, "d", "current.tmp"), filepath.Join(mnt, "d", "current")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "d", "gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(mnt, "d", "short"), 4); err != nil {
		t.Fatal(err)
	}
	powerLoss(t, f, Loss{})
	for name, want := range map[string]string{"current": "old state", "current.tmp": "<none>", "gone": "removed later", "short": "0123456789"} {
		if got := content(t, filepath.Join(backing, "d", name)); got != want {
			t.Errorf("d/%s after the power loss: %q, want %q", name, got, want)
		}
	}
	entries, _ := os.ReadDir(backing + ".stash")
	if len(entries) != 0 {
		t.Errorf("the stash keeps %d links after the undo", len(entries))
	}
}

// With the directory fsynced after the rename, the new state survives and
// the replaced file's stash link is gone.
func TestSyncedRenameSurvives(t *testing.T) {
	f, mnt, backing := mount(t)
	write(t, filepath.Join(mnt, "current"), "old state", true)
	syncDir(t, mnt)
	write(t, filepath.Join(mnt, "current.tmp"), "new state", true)
	if err := os.Rename(filepath.Join(mnt, "current.tmp"), filepath.Join(mnt, "current")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	if n := f.Unsynced(); n != 0 {
		t.Fatalf("%d changes unsynced after every fsync", n)
	}
	powerLoss(t, f, Loss{})
	if got := content(t, filepath.Join(backing, "current")); got != "new state" {
		t.Fatalf("current after the power loss: %q", got)
	}
	if entries, _ := os.ReadDir(backing + ".stash"); len(entries) != 0 {
		t.Errorf("the stash keeps %d links of durable changes", len(entries))
	}
}

// A torn write keeps a prefix of the last unsynced write: never all of
// it, and what it keeps is the write's own first bytes.
func TestTornWriteKeepsAPrefix(t *testing.T) {
	f, mnt, backing := mount(t)
	write(t, filepath.Join(mnt, "log"), "head|", true)
	syncDir(t, mnt)
	tail := "0123456789abcdefghij"
	appendTo(t, filepath.Join(mnt, "log"), tail, false)
	if w := f.LastWrite(); w != "log" {
		t.Fatalf("LastWrite before the power loss: %q, want log", w)
	}
	lost := powerLoss(t, f, Loss{Torn: true, Rand: rand.New(rand.NewSource(7))})
	got := content(t, filepath.Join(backing, "log"))
	if want := fmt.Sprintf("log: kept %d of %d bytes written at 5", len(got)-5, len(tail)); lost.Torn != want {
		t.Errorf("Lost.Torn = %q, want %q", lost.Torn, want)
	}
	if len(got) < len("head|") || got[:5] != "head|" || len(got) >= len("head|")+len(tail) || !bytes.HasPrefix([]byte(tail), []byte(got[5:])) {
		t.Fatalf("after a torn write: %q, want head| and a proper prefix of %q", got, tail)
	}
	t.Logf("the torn write kept %q", got[5:])
}

// FailFsync makes fsync fail with EIO, and nothing it was asked to make
// durable is.
func TestFailedFsyncMakesNothingDurable(t *testing.T) {
	f, mnt, backing := mount(t)
	write(t, filepath.Join(mnt, "f"), "durable", true)
	syncDir(t, mnt)
	f.FailFsync(true)
	fd, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fd.Write([]byte(" lost")); err != nil {
		t.Fatal(err)
	}
	if err := fd.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync with FailFsync: %v, want EIO", err)
	}
	fd.Close()
	powerLoss(t, f, Loss{})
	if got := content(t, filepath.Join(backing, "f")); got != "durable" {
		t.Fatalf("after a failed fsync and a power loss: %q", got)
	}
}

// CutAt cuts the power right after the write it waits for: later writes
// and fsyncs wait (none reaches the disk), fail once the power loss is
// done, and a torn power loss tears the write the cut came after.
func TestCutStopsEverythingAfterTheWrite(t *testing.T) {
	f, mnt, backing := mount(t)
	write(t, filepath.Join(mnt, "log"), "head|", true)
	syncDir(t, mnt)
	cut := f.CutAt(func(p string) bool { return p == "log" })
	write(t, filepath.Join(mnt, "other"), "not the one", false)
	select {
	case p := <-cut:
		t.Fatalf("cut at %s", p)
	default:
	}
	appendTo(t, filepath.Join(mnt, "log"), "0123456789", false)
	select {
	case p := <-cut:
		if p != "log" {
			t.Fatalf("cut after a write to %q", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no cut after the write to log")
	}
	done := make(chan error, 1)
	go func() {
		fd, err := os.OpenFile(filepath.Join(mnt, "log"), os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			if _, err = fd.Write([]byte("after")); err == nil {
				err = fd.Sync()
			}
			fd.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a write after the cut returned (%v) before the power loss", err)
	case <-time.After(200 * time.Millisecond):
	}
	lost := powerLoss(t, f, Loss{Torn: true, Rand: rand.New(rand.NewSource(3))})
	if err := <-done; !errors.Is(err, syscall.EIO) {
		t.Errorf("the write after the cut: %v, want EIO", err)
	}
	got := content(t, filepath.Join(backing, "log"))
	if !strings.HasPrefix(got, "head|") || len(got) >= len("head|0123456789") || !strings.HasPrefix("0123456789", got[5:]) {
		t.Errorf("log after the cut and power loss: %q, want head| and a proper prefix of 0123456789", got)
	}
	if !strings.HasPrefix(lost.Torn, "log: kept ") {
		t.Errorf("Lost.Torn = %q, want the write to log", lost.Torn)
	}
	if _, err := os.Stat(filepath.Join(backing, "other")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unsynced file survived the power loss: %v", err)
	}
	t.Logf("cut after the write to log; %+v", lost)
}

// A directory whose removal became durable takes its unsynced changes
// with it: the power loss does not try to restore entries in it.
func TestDurablyRemovedDirectoryTakesItsChanges(t *testing.T) {
	f, mnt, backing := mount(t)
	sub := filepath.Join(mnt, "wal")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(sub, "seg"), "data", true)
	syncDir(t, sub)
	syncDir(t, mnt)
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt) // the rmdir is durable; the unlink in wal/ never was
	lost := powerLoss(t, f, Loss{})
	if _, err := os.Stat(filepath.Join(backing, "wal")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the durably removed directory is back: %v", err)
	}
	t.Logf("%+v", lost)
}
