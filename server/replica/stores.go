package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"coord/server/internal/logbridge"
)

// The raft log stores a data directory can hold. Both keep raft's log and
// its stable state (current term, vote) on disk under DataDir.
const (
	// LogStoreBolt is raft-boltdb/v2: one bbolt file, raft.db; every
	// append is a bbolt transaction (a data fsync and a meta-page fsync).
	LogStoreBolt = "bolt"
	// LogStoreWAL is raft-wal: segment files and a small bbolt meta file
	// under wal/; an append is one write and one fsync of the tail
	// segment.
	LogStoreWAL = "wal"
	// DefaultLogStore is the store a new data directory gets when none is
	// named: raft-wal, ahead of bbolt in every row of the side-by-side in
	// docs/benchmarks.md (1.6-2x writes with one request in flight).
	DefaultLogStore = LogStoreWAL
)

// WALSegmentBytes is the size of a raft-wal segment file, preallocated
// when the log rotates to it: the free space a wal store needs to go on
// appending (raft-wal's default is 64 MiB; smaller keeps that headroom
// small beside Config.MinFreeDisk's default).
const WALSegmentBytes = 16 << 20

// LogStoreKinds lists the valid Config.LogStoreKind values.
var LogStoreKinds = []string{LogStoreBolt, LogStoreWAL}

// existingLogStore reports which store dataDir already holds ("" if none).
func existingLogStore(dataDir string) (string, error) {
	var found []string
	if _, err := os.Stat(filepath.Join(dataDir, "raft.db")); err == nil {
		found = append(found, LogStoreBolt)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dataDir, "wal")); err == nil {
		found = append(found, LogStoreWAL)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("server: %s holds both a bolt (raft.db) and a wal (wal/) raft log; remove the one not in use", dataDir)
}

// openLogStore opens (or creates) the raft log and stable store under
// dataDir. kind "" takes the store the directory already holds, or
// DefaultLogStore in a new directory; a kind that differs from the one
// the directory holds is refused, since the log cannot be read across
// them (move a server to another store by adding a fresh server).
func openLogStore(dataDir, kind string, log *slog.Logger) (raft.LogStore, raft.StableStore, io.Closer, string, error) {
	have, err := existingLogStore(dataDir)
	if err != nil {
		return nil, nil, nil, "", err
	}
	switch {
	case kind == "" && have != "":
		kind = have
	case kind == "":
		kind = DefaultLogStore
	case have != "" && have != kind:
		return nil, nil, nil, "", fmt.Errorf("server: %s holds a %q raft log, not %q: start with -log-store %s, or move to %s by adding a server with an empty data directory", dataDir, have, kind, have, kind)
	}
	switch kind {
	case LogStoreBolt:
		store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dataDir, "raft.db"), BoltOptions: boltOptions()})
		if err != nil {
			return nil, nil, nil, "", fmt.Errorf("server: opening raft store: %w", err)
		}
		return store, store, store, kind, nil
	case LogStoreWAL:
		dir := filepath.Join(dataDir, "wal")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, nil, nil, "", fmt.Errorf("server: opening raft wal: %w", err)
		}
		// raft-wal v0.4.0's Close leaves its meta file open (and locked,
		// so reopening it in this process would wait forever): the meta
		// store is made here and closed with the log.
		meta := &metadb.BoltMetaDB{}
		segments := wal.WithSegmentSize(WALSegmentBytes) // (again, below: nothing else to add)
		if plantedSegmentVFS != nil {
			// A planted bug (jepsenplanted builds only).
			segments = wal.WithSegmentFiler(segment.NewFiler(dir, plantedSegmentVFS(walfs.New())))
		}
		w, err := wal.Open(dir, wal.WithLogger(logbridge.HCLog(log, "wal")), wal.WithMetaStore(meta), wal.WithSegmentSize(WALSegmentBytes), segments)
		if err != nil {
			meta.Close()
			return nil, nil, nil, "", fmt.Errorf("server: opening raft wal: %w", err)
		}
		return w, w, walCloser{w, meta}, kind, nil
	}
	return nil, nil, nil, "", fmt.Errorf("server: unknown log store %q (one of %v)", kind, LogStoreKinds)
}

// plantedSegmentVFS is nil except in builds with the jepsenplanted tag
// (planted_jepsen.go), where it wraps the files raft-wal writes its
// segments through.
var plantedSegmentVFS func(types.VFS) types.VFS

// LogStoreBytes is the size on disk of the raft log store under dataDir:
// raft.db, or the files under wal/.
func LogStoreBytes(dataDir string) int64 {
	var n int64
	if st, err := os.Stat(filepath.Join(dataDir, "raft.db")); err == nil {
		n += st.Size()
	}
	entries, _ := os.ReadDir(filepath.Join(dataDir, "wal"))
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// LogStoreUsedBytes is how many bytes of its files the raft log store
// uses, without the room its files hold for what comes next (which
// LogStoreBytes counts): a bolt store's raft.db up to its high-water mark
// less its free pages (bbolt grows the file ahead of use and reuses the
// pages compaction frees); a wal store's segment files up to the end of
// what raft-wal wrote in them (it preallocates each segment whole), its
// small meta file not counted. 0 with stores handed in.
func (r *Replica) LogStoreUsedBytes() int64 {
	switch r.storeKind {
	case LogStoreBolt:
		bs, ok := r.closer.(*raftboltdb.BoltStore)
		if !ok {
			return 0
		}
		hwm := boltHighWater(filepath.Join(r.cfg.DataDir, "raft.db"))
		return max(hwm-int64(bs.Stats().FreeAlloc), 0)
	case LogStoreWAL:
		paths, _ := filepath.Glob(filepath.Join(r.cfg.DataDir, "wal", "*.wal"))
		var n int64
		for _, p := range paths {
			n += walSegmentUsed(p)
		}
		return n
	}
	return 0
}

// walSegmentUsed is how much of a raft-wal segment file is written: up to
// its last non-zero byte, rounded up to raft-wal's 8-byte frame alignment.
// raft-wal writes a segment from its start and ends every append with a
// commit frame, whose header (type 3) is not zero; the rest of the file is
// the zeros of its preallocation. It reads about 30 pages, not the file: a
// binary search for the last 4 KiB page that is not all zero, then that
// page (Status asks on every call, and a fresh segment is tens of MB of
// zeros). A written stretch of 4 KiB or more of zeros (a znode's data) can
// make it count short; it is a size to show, nothing depends on it.
func walSegmentUsed(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	const page = 4096
	buf := make([]byte, page)
	// lastNonZero is the offset just past the page's last non-zero byte,
	// 0 if it is all zero; -1 if it cannot be read.
	lastNonZero := func(p int64) int64 {
		n, err := f.ReadAt(buf, p*page)
		if err != nil && n == 0 {
			return -1
		}
		for i := n - 1; i >= 0; i-- {
			if buf[i] != 0 {
				return p*page + int64(i) + 1
			}
		}
		return 0
	}
	pages := (st.Size() + page - 1) / page
	lo, hi := int64(0), pages // the answer's page is in [lo, hi)
	for lo+1 < hi {
		mid := (lo + hi) / 2
		switch end := lastNonZero(mid); {
		case end < 0:
			return st.Size() // unreadable: count it whole
		case end == 0:
			hi = mid
		default:
			lo = mid
		}
	}
	if pages == 0 {
		return 0
	}
	end := lastNonZero(lo)
	if end < 0 {
		return st.Size()
	}
	return (end + 7) &^ 7
}

// boltHighWater is the size of the pages a bbolt file has allocated (its
// meta page's high-water mark times the page size), read from the newer
// valid one of its two meta pages; the file's size if they cannot be read.
func boltHighWater(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	// A meta page: a 16-byte page header, then magic, version, page size,
	// flags (4 bytes each), the root bucket (16), the freelist page, the
	// high-water page id, the txid and a checksum (FNV-64a of what
	// precedes it from the magic on), 8 bytes each.
	const metaOff, metaLen = 16, 64
	var best, bestTx uint64
	pageSize := int64(0)
	for i := int64(0); i < 2; i++ {
		var m [metaOff + metaLen]byte
		if _, err := f.ReadAt(m[:], i*pageSize); err != nil {
			break
		}
		meta := m[metaOff:]
		h := fnv.New64a()
		h.Write(meta[:56])
		if binary.LittleEndian.Uint32(meta[0:]) != 0xED0CDAED || h.Sum64() != binary.LittleEndian.Uint64(meta[56:]) {
			if i == 0 {
				pageSize = int64(os.Getpagesize())
			}
			continue
		}
		if i == 0 {
			pageSize = int64(binary.LittleEndian.Uint32(meta[8:]))
		}
		if tx := binary.LittleEndian.Uint64(meta[48:]); best == 0 || tx > bestTx {
			best, bestTx = binary.LittleEndian.Uint64(meta[40:]), tx
		}
	}
	if best == 0 || pageSize <= 0 {
		return st.Size()
	}
	return min(int64(best)*pageSize, st.Size())
}

// walCloser closes a raft-wal log and then its meta store.
type walCloser struct {
	w    *wal.WAL
	meta *metadb.BoltMetaDB
}

func (c walCloser) Close() error {
	return errors.Join(c.w.Close(), c.meta.Close())
}

// StoreHeadroom is the free disk space the raft log store needs to go on
// appending: a wal segment, preallocated whole when the log rotates to it
// (0 for bolt, which grows a page at a time, and for stores handed in).
func (r *Replica) StoreHeadroom() uint64 {
	if r.storeKind == LogStoreWAL {
		return WALSegmentBytes
	}
	return 0
}

// SyncDir fsyncs the directory at path, so that the entries created,
// renamed or removed in it survive a power loss (an fsync of a file does
// not make its name durable).
func SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("server: syncing directory %s: %w", path, err)
	}
	return nil
}

// SetAsideRaftState moves the raft state under dataDir (wal/ or raft.db,
// and snapshots/) into a new directory corrupt-<time>/ in it, kept for a
// post-mortem (the same filesystem, so the moves are renames), and syncs
// dataDir: a server started on it afterwards starts empty and takes the
// state from the others (server.Config.Rebuild). members.json and a
// cluster.key stay. It returns the new directory, "" if there was nothing
// to move.
func SetAsideRaftState(dataDir string, now time.Time) (string, error) {
	var moved []string
	for _, name := range []string{"wal", "raft.db", "snapshots"} {
		if _, err := os.Lstat(filepath.Join(dataDir, name)); err == nil {
			moved = append(moved, name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	if len(moved) == 0 {
		return "", nil
	}
	aside := filepath.Join(dataDir, "corrupt-"+now.UTC().Format("20060102-150405"))
	if err := os.Mkdir(aside, 0o750); err != nil {
		return "", fmt.Errorf("server: setting the raft state aside: %w", err)
	}
	for _, name := range moved {
		if err := os.Rename(filepath.Join(dataDir, name), filepath.Join(aside, name)); err != nil {
			return "", fmt.Errorf("server: setting the raft state aside: %w", err)
		}
	}
	if err := SyncDir(aside); err != nil {
		return "", err
	}
	return aside, SyncDir(dataDir)
}
