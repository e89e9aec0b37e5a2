package replica

import (
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Snapshots by size. Raft counts log entries to decide when to snapshot
// (SnapshotThreshold), but the proposer packs up to maxBatchCommands
// commands into one entry, so under load the entry count grows slowly while
// the log's bytes grow fast: 1M creates and 150k setData left 270 MB of log
// and were never snapshotted. So the replica also counts the bytes of the
// command entries applied since the state of the last snapshot (apply sees
// every committed entry, the replay after a restart too, so the count is
// rebuilt at start) and, past Config.SnapshotLogBytes, asks raft for a
// snapshot. Before it does, it lowers raft's TrailingLogs to the entries
// since the previous snapshot (never above Config.TrailingLogs), so the log
// raft keeps after compaction is bounded in bytes too: about
// SnapshotLogBytes of entries before the new snapshot plus what arrived
// since. A follower further behind than that installs the snapshot.
//
// Taking the snapshot is O(1) for apply: raftFSM.Snapshot keeps a pointer to
// the current immutable view, and Persist streams it out while applies go
// on.

// snapStats are the replica's snapshot counters.
type snapStats struct {
	count     atomic.Uint64
	nanos     atomic.Uint64 // total time spent persisting
	lastNanos atomic.Uint64
	lastSize  atomic.Uint64
	lastIndex atomic.Uint64 // raft index the last snapshot (taken or restored) covers
	// sinceBytes is the bytes of command entries applied after lastIndex.
	sinceBytes atomic.Uint64
	// noSpace counts snapshots skipped for want of free disk.
	noSpace atomic.Uint64
}

// SnapshotStats describe this server's snapshots since it started.
type SnapshotStats struct {
	Taken        uint64        // snapshots persisted
	Duration     time.Duration // total time spent persisting them
	LastDuration time.Duration
	LastSize     uint64 // bytes of the last one
	LastIndex    uint64 // raft index the last snapshot (taken or installed) covers
	// LogBytes is the bytes of command entries applied since the state of
	// the last snapshot: what a restart would replay.
	LogBytes uint64
	// SkippedNoSpace counts snapshots due by log size that were skipped
	// because the disk had no room for them.
	SkippedNoSpace uint64
}

// SnapshotStats returns this server's snapshot counters.
func (r *Replica) SnapshotStats() SnapshotStats {
	s := &r.fsm.snaps
	return SnapshotStats{Taken: s.count.Load(), Duration: time.Duration(s.nanos.Load()),
		LastDuration: time.Duration(s.lastNanos.Load()), LastSize: s.lastSize.Load(),
		LastIndex: s.lastIndex.Load(), LogBytes: s.sinceBytes.Load(), SkippedNoSpace: s.noSpace.Load()}
}

// countApplied adds an applied entry's bytes and wakes the snapshotter once
// they pass the limit. applyMu is held.
func (r *raftFSM) countApplied(l *raft.Log) {
	n := r.snaps.sinceBytes.Add(uint64(len(l.Data)))
	if at := r.snapAt.Load(); at > 0 && n >= at {
		select {
		case r.snapWake <- struct{}{}:
		default:
		}
	}
}

// rollSnapAt draws the log size that triggers the next snapshot: half the
// limit plus a random part of the other half, as ZooKeeper draws its
// snapCount roll. Servers of one cluster apply the same entries, so with
// one fixed limit they would all write their snapshots at the same moment
// and slow every write together; the log kept stays below the limit.
//
// But never less than a quarter of the last snapshot's size: with large
// values (a tree of a thousand 1 MB znodes) a snapshot is many times the
// limit, and writing the whole tree again for every few dozen megabytes
// written slowed writes several-fold; this bounds a snapshot's bytes to
// four times the log bytes it compacts, and the log to a quarter of the
// state's size.
func (r *raftFSM) rollSnapAt() {
	if r.snapLimit == 0 {
		r.snapAt.Store(0)
		return
	}
	half := r.snapLimit / 2
	r.snapAt.Store(max(r.snapLimit-half+rand.Uint64N(half+1), r.snaps.lastSize.Load()/4))
}

// persisted records a snapshot of the state at index, which covered bytes
// of the count, written in d with size bytes.
func (r *raftFSM) persisted(index, bytes, size uint64, d time.Duration) {
	s := &r.snaps
	// Subtract what the snapshot covers: entries applied since stay
	// counted (a snapshot installed meanwhile may have reset the count).
	for {
		cur := s.sinceBytes.Load()
		if s.sinceBytes.CompareAndSwap(cur, cur-min(cur, bytes)) {
			break
		}
	}
	s.lastIndex.Store(index)
	s.count.Add(1)
	s.nanos.Add(uint64(d))
	s.lastNanos.Store(uint64(d))
	s.lastSize.Store(size)
	r.rollSnapAt()
}

// restored records that the state is now a snapshot's, at index.
func (r *raftFSM) restored(index uint64) {
	r.snaps.sinceBytes.Store(0)
	r.snaps.lastIndex.Store(index)
	r.rollSnapAt()
}

// runSnapshots takes a snapshot whenever apply reports the log past the
// byte limit, until the replica closes.
func (r *Replica) runSnapshots() {
	defer r.wg.Done()
	for {
		select {
		case <-r.fsm.snapWake:
		case <-r.closing:
			return
		}
		if r.fsm.snaps.sinceBytes.Load() < r.fsm.snapAt.Load() {
			continue // a snapshot raft took on its own got there first
		}
		if !r.awaitReplay() {
			return
		}
		if free, need, ok := r.snapshotFits(); !ok {
			r.fsm.snaps.noSpace.Add(1)
			// A snapshot that fills the disk would take the space the
			// next log append needs; the log grows meanwhile until the
			// free-space check refuses writes, and nothing is lost.
			r.log.Warn("not enough free disk for a snapshot; the raft log grows until space is freed",
				"dir", r.cfg.DataDir, "free_bytes", free, "need_bytes", need)
			select {
			case <-time.After(time.Minute):
			case <-r.closing:
				return
			}
			continue
		}
		if err := r.snapshotBySize(); err != nil {
			r.log.Warn("snapshot by log size failed; retrying later", "err", err)
			select {
			case <-time.After(r.cfg.RaftTimeout):
			case <-r.closing:
				return
			}
		}
	}
}

// StartupScanSkipped is how many entries raft's startup scan was answered
// without their data (startscan.go), and ReplayDecoded how many entries
// the replay applied from commands decoded as raft read them
// (predecode.go): for tests and diagnostics.
func (r *Replica) StartupScanSkipped() uint64 { return r.scanSkipped }
func (r *Replica) ReplayDecoded() uint64      { return r.fsm.pre.used.Load() }

// ReplayTo is the last index of the log this server started with, which
// it replays after its snapshot (for tests and diagnostics).
func (r *Replica) ReplayTo() uint64 { return r.replayTo }

// replayWait bounds awaitReplay: a replay that has not ended by then (a
// follower cut off from its leader) lets snapshots by size go on.
const replayWait = 2 * time.Minute

// awaitReplay waits until this server has applied the log it started with
// (replayTo), at most replayWait, and reports false if the replica closed
// meanwhile. A restarted server replays its log past its snapshot before
// it serves, and the byte count it rebuilds as it goes passes a newly drawn
// threshold in mid-replay as often as not: a snapshot then writes the
// whole tree (a core for most of a minute at 10M znodes, the old tree's
// nodes kept alive while every replayed write copies its path) just when
// the server should catch up. So the snapshot waits for the replay; the
// log it would compact grows meanwhile only by what the replay has not
// reached yet.
func (r *Replica) awaitReplay() bool {
	deadline := time.Now().Add(replayWait)
	for r.fsm.applied.Load() < r.replayTo && time.Now().Before(deadline) {
		select {
		case <-r.closing:
			return false
		default:
		}
		r.fsm.awaitApplied(r.replayTo, 100*time.Millisecond)
	}
	return true
}

// snapshotFits reports whether the data directory has room for the next
// snapshot with the log store's headroom left over. The snapshot's size is
// estimated from above: the newest stored snapshot's size plus the log
// bytes applied since it. With stores handed in (tests) it always fits.
func (r *Replica) snapshotFits() (free, need uint64, ok bool) {
	if r.cfg.DataDir == "" || r.snapStore == nil || r.storeKind == "" {
		return 0, 0, true
	}
	var last uint64
	if metas, err := r.snapStore.List(); err == nil && len(metas) > 0 {
		last = uint64(max(metas[0].Size, 0))
	}
	last = max(last, r.fsm.snaps.lastSize.Load())
	free, err := diskFree(r.cfg.DataDir)
	if err != nil {
		return 0, 0, true // cannot tell: let the snapshot try
	}
	need = last + r.fsm.snaps.sinceBytes.Load() + r.StoreHeadroom()
	return free, need, free >= need
}

// diskFree is freeBytes; tests replace it.
var diskFree = freeBytes

// freeBytes is the space available to this process on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// snapshotBySize bounds what compaction keeps to the entries since the
// previous snapshot, then has raft take a snapshot.
func (r *Replica) snapshotBySize() error {
	prev := r.fsm.snaps.lastIndex.Load()
	trailing := r.cfg.TrailingLogs
	if last := r.raft.LastIndex(); last > prev && last-prev < trailing {
		trailing = last - prev
	}
	if rc := r.raft.ReloadableConfig(); rc.TrailingLogs != trailing {
		rc.TrailingLogs = trailing
		if err := r.raft.ReloadConfig(rc); err != nil {
			return err
		}
	}
	r.log.Info("log past the snapshot size; taking a snapshot", "log_bytes", r.fsm.snaps.sinceBytes.Load(),
		"at", r.fsm.snapAt.Load(), "limit", r.fsm.snapLimit, "trailing_logs", trailing)
	err := r.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

// LogSize reads the whole log and returns its index range and the bytes of
// its entries' data: for tests and diagnostics, not the request path.
func (r *Replica) LogSize() (first, last, bytes uint64, err error) {
	if first, err = r.logs.FirstIndex(); err != nil {
		return 0, 0, 0, err
	}
	if last, err = r.logs.LastIndex(); err != nil {
		return 0, 0, 0, err
	}
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := r.logs.GetLog(i, &l); err != nil {
			return 0, 0, 0, err
		}
		bytes += uint64(len(l.Data))
	}
	return first, last, bytes, nil
}
