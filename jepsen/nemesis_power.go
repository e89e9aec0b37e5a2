package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"coord/api"
	"coord/jepsen/forgetfs"
)

// The power nemeses run every server on forgetfs (jepsen/forgetfs): a FUSE
// filesystem mounted over its data directory that passes everything
// through to a backing directory but remembers how to undo what no fsync
// made durable. A kill -9 leaves the page cache, so every write survives
// it; a power loss does not, and that is what these simulate:
//
//   - power-loss, power-loss-minority, power-loss-all: one voter, a
//     minority of the voters, or every server loses power at once, each
//     right after its next write (so that one is in flight): killed, and
//     everything it had not fsynced undone (half the time tearing the
//     last unsynced write). The disk comes back at once; the servers start
//     again at Heal.
//   - torn-write: a voter loses power right after a write to its raft log
//     or (asked for a snapshot just then) to a snapshot it is writing, and
//     that write survives only in part.
//   - fsync-error: fsync fails with EIO on a voter's data directory. The
//     server must stop (and say why) rather than go on as if its data were
//     safe; at Heal what it failed to sync is dropped, as a disk that
//     reported the error may have, and it starts again.
//
// They need root and /dev/fuse; without them the runner leaves them out
// and says so in the report's notes.
type powerDisks struct {
	fs []*forgetfs.FS // by server index
}

func (d *powerDisks) prepare(dir string, voters, servers int) (err error) {
	if d.fs != nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (a FUSE mount)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("needs /dev/fuse: %v", err)
	}
	defer func() {
		if err != nil {
			d.cleanup()
		}
	}()
	mounts, _ := os.ReadFile("/proc/mounts")
	for i := 0; i < servers; i++ {
		id := fmt.Sprintf("s%d", i+1)
		mnt := filepath.Join(dir, id, "data")
		backing := filepath.Join(dir, id, "disk")
		if strings.Contains(string(mounts), " "+mnt+" ") {
			return fmt.Errorf("%s is a mount already (disk-full or disk-slow): run them apart", mnt)
		}
		for _, p := range []string{mnt, backing} {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		}
		f, err := forgetfs.Mount(mnt, backing)
		if err != nil {
			return err
		}
		d.fs = append(d.fs, f)
	}
	return nil
}

// cleanup unmounts every data directory (the servers must have stopped);
// the backing directories stay with the run's results.
func (d *powerDisks) cleanup() error {
	var errs []error
	for _, f := range d.fs {
		if err := f.Unmount(); err != nil {
			errs = append(errs, fmt.Errorf("jepsen: %v", err))
		}
	}
	d.fs = nil
	return errors.Join(errs...)
}

// kill kills the servers at once: SIGKILL to each, then their disks
// answer what waits since a power cut (EIO, to processes that can no
// longer act on it), then it waits for them to exit.
func (d *powerDisks) kill(c *Cluster, servers ...int) {
	for _, i := range servers {
		c.sendKill(i)
	}
	for _, i := range servers {
		d.fs[i].Thaw()
	}
	for _, i := range servers {
		c.Kill(i)
	}
}

// lose undoes what server i's disk had not made durable (the server must
// be down) and mounts it again.
func (d *powerDisks) lose(c *Cluster, i int, loss forgetfs.Loss) (string, error) {
	f := d.fs[i]
	lost, err := f.PowerLoss(loss)
	desc := fmt.Sprintf("%s lost %d unsynced changes", c.ID(i), lost.Undone)
	if len(lost.What) > 0 {
		desc += " [" + strings.Join(lost.What, ", ") + "]"
	}
	if lost.Torn != "" {
		desc += " (torn " + lost.Torn + ")"
	}
	if e := f.Remount(); e != nil {
		err = errors.Join(err, e)
	}
	return desc, err
}

// powerLossNemesis cuts the power of one voter, a minority of the voters or
// every server at once.
type powerLossNemesis struct {
	d    *powerDisks
	kind string // "one", "minority", "all"
	down []int
}

func (n *powerLossNemesis) Name() string {
	if n.kind == "one" {
		return "power-loss"
	}
	return "power-loss-" + n.kind
}

func (n *powerLossNemesis) prepare(dir string, voters, servers int) error {
	return n.d.prepare(dir, voters, servers)
}
func (n *powerLossNemesis) cleanup() error { return n.d.cleanup() }

func (n *powerLossNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	var targets []int
	switch n.kind {
	case "one":
		targets = []int{r.Intn(c.Voters())}
	case "minority":
		targets = r.Perm(c.Voters())[:max(1, (c.Voters()-1)/2)]
	case "all":
		for i := 0; i < c.Size(); i++ {
			targets = append(targets, i)
		}
	}
	ids := make([]string, len(targets))
	for k, i := range targets {
		ids[k] = c.ID(i)
	}
	// The power goes right after each target's next write (or after a
	// moment without one), so that something is in flight; every target
	// is killed before any disk forgets.
	cuts := make([]<-chan string, len(targets))
	for k, i := range targets {
		cuts[k] = n.d.fs[i].CutAt(func(string) bool { return true })
	}
	deadline := time.After(powerCutWindow)
	cutAt := make([]string, len(targets))
	for k := range targets {
		select {
		case cutAt[k] = <-cuts[k]:
		case <-deadline:
		case <-ctx.Done():
		}
	}
	n.d.kill(c, targets...)
	n.down = append(n.down, targets...)
	parts := []string{fmt.Sprintf("power off %s (%d of %d servers)", strings.Join(ids, ","), len(targets), c.Size())}
	var errs []error
	for k, i := range targets {
		desc, err := n.d.lose(c, i, forgetfs.Loss{Torn: r.Intn(2) == 0, Rand: r})
		if cutAt[k] != "" {
			desc += " after a write of " + cutAt[k]
		}
		parts = append(parts, desc)
		errs = append(errs, err)
	}
	return strings.Join(parts, "; "), errors.Join(errs...)
}

func (n *powerLossNemesis) Heal(ctx context.Context, c *Cluster) error {
	var errs []error
	for _, i := range n.down {
		if !c.Running(i) {
			errs = append(errs, c.Start(i))
		}
	}
	n.down = nil
	return errors.Join(errs...)
}

// tornWriteNemesis cuts a voter's power right after a write to its raft
// log or to a snapshot it is writing, and keeps a part of that write.
type tornWriteNemesis struct {
	d    *powerDisks
	down int
}

func (n *tornWriteNemesis) Name() string { return "torn-write" }
func (n *tornWriteNemesis) prepare(dir string, voters, servers int) error {
	return n.d.prepare(dir, voters, servers)
}
func (n *tornWriteNemesis) cleanup() error { return n.d.cleanup() }

// powerCutWindow bounds the wait for a write to cut the power after.
const powerCutWindow = time.Second

// tornWindow bounds the wait for a write of the kind wanted.
const tornWindow = 3 * time.Second

func isLogFile(p string) bool {
	return (strings.HasPrefix(p, "wal/") && strings.HasSuffix(p, ".wal")) || p == "raft.db"
}

func isSnapshotFile(p string) bool {
	return strings.HasPrefix(p, "snapshots/") && strings.HasSuffix(p, "/state.bin")
}

func (n *tornWriteNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	i := r.Intn(c.Voters())
	n.down = i
	f := n.d.fs[i]
	what, match := "raft log", isLogFile
	if r.Intn(2) == 0 {
		what, match = "snapshot", isSnapshotFile
	}
	// The power goes right after the next write of that kind: nothing
	// after it reaches the disk.
	cut := f.CutAt(match)
	if what == "snapshot" {
		// A server writes a snapshot when asked; the answer does not
		// matter (the server is gone before it), the write does.
		go c.adminAt(ctx, i, func(ctx context.Context, a api.AdminClient) error {
			_, err := a.Snapshot(ctx, &api.SnapshotRequest{})
			return err
		})
	}
	seen := ""
	select {
	case seen = <-cut:
	case <-time.After(tornWindow):
	case <-ctx.Done():
	}
	n.d.kill(c, i)
	desc, err := n.d.lose(c, i, forgetfs.Loss{Torn: true, Rand: r})
	if seen == "" {
		return fmt.Sprintf("power off %s: no write of its %s in %v; %s", c.ID(i), what, tornWindow, desc), err
	}
	return fmt.Sprintf("power off %s right after a write of its %s (%s); %s", c.ID(i), what, seen, desc), err
}

func (n *tornWriteNemesis) Heal(ctx context.Context, c *Cluster) error {
	if c.Running(n.down) {
		return nil
	}
	return c.Start(n.down)
}

// fsyncErrorNemesis makes fsync fail with EIO under a voter's data
// directory.
type fsyncErrorNemesis struct {
	d      *powerDisks
	target int
	since  int64 // the target's log size at Inject
	note   string
}

func (n *fsyncErrorNemesis) Name() string { return "fsync-error" }
func (n *fsyncErrorNemesis) prepare(dir string, voters, servers int) error {
	return n.d.prepare(dir, voters, servers)
}
func (n *fsyncErrorNemesis) cleanup() error   { return n.d.cleanup() }
func (n *fsyncErrorNemesis) HealNote() string { return n.note }

// fsyncStopWindow is how long the nemesis watches for the server to stop.
const fsyncStopWindow = 5 * time.Second

func (n *fsyncErrorNemesis) Inject(ctx context.Context, c *Cluster, r *rand.Rand) (string, error) {
	n.note = ""
	i := r.Intn(c.Voters())
	n.target = i
	if st, err := os.Stat(c.LogPath(i)); err == nil {
		n.since = st.Size()
	}
	f := n.d.fs[i]
	before := f.Fsyncs()
	f.FailFsync(true)
	desc := fmt.Sprintf("fsync fails with EIO on %s's data directory", c.ID(i))
	t0 := time.Now()
	for time.Since(t0) < fsyncStopWindow && c.Running(i) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	failed := f.Fsyncs() - before
	if c.Running(i) {
		return desc + fmt.Sprintf("; %d fsyncs failed, still running after %v", failed, fsyncStopWindow), nil
	}
	return desc + fmt.Sprintf("; %d fsyncs failed, the server stopped after %v", failed, time.Since(t0).Round(time.Millisecond)), nil
}

func (n *fsyncErrorNemesis) Heal(ctx context.Context, c *Cluster) error {
	i := n.target
	f := n.d.fs[i]
	f.FailFsync(false)
	// A server that saw the failure late (its next fsync came after the
	// window) is still on its way out: wait for it, bounded, rather than
	// call it healed and have it exit under the checkers.
	for t0 := time.Now(); c.Running(i) && strings.Contains(n.logSince(c), storeFailedMsg) &&
		time.Since(t0) < fsyncExitWait && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
	}
	if c.Running(i) {
		n.note = c.ID(i) + " kept running"
		return nil
	}
	tail := stopReason(n.logSince(c))
	// What the server wrote but failed to sync may be gone, as on a disk
	// that reported the error: drop it before the server starts again.
	desc, err := n.d.lose(c, i, forgetfs.Loss{})
	n.note = fmt.Sprintf("%s stopped: %s; %s; started again", c.ID(i), tail, desc)
	return errors.Join(err, c.Start(i))
}

// storeFailedMsg is what a server logs when its raft store failed and it
// must stop (server/replica).
const storeFailedMsg = "raft store failed: the server must stop"

// fsyncExitWait bounds the wait for a server that logged storeFailedMsg to
// exit (cmd/coord bounds its own close at 5 s).
const fsyncExitWait = 15 * time.Second

// logSince is what the target logged since Inject.
func (n *fsyncErrorNemesis) logSince(c *Cluster) string {
	f, err := os.Open(c.LogPath(n.target))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, n.since, 1<<40))
	if err != nil {
		return ""
	}
	return string(b)
}

// stopReason is the line of a server's log that says why it stopped: the
// first at level ERROR, or a panic, or the last line; without its time
// stamp, and at most 600 bytes.
func stopReason(log string) string {
	line := ""
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=ERROR") || strings.HasPrefix(l, "panic:") {
			line = l
			break
		}
	}
	if line == "" {
		line = strings.TrimSpace(log)
		if i := strings.LastIndexByte(line, '\n'); i >= 0 {
			line = line[i+1:]
		}
	}
	if strings.HasPrefix(line, "time=") {
		if i := strings.IndexByte(line, ' '); i >= 0 {
			line = line[i+1:]
		}
	}
	if len(line) > 600 {
		line = line[:600]
	}
	return line
}
