package replica

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"coord/internal/logbridge"
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
		w, err := wal.Open(dir, wal.WithLogger(logbridge.HCLog(log, "wal")), wal.WithMetaStore(meta), wal.WithSegmentSize(WALSegmentBytes))
		if err != nil {
			meta.Close()
			return nil, nil, nil, "", fmt.Errorf("server: opening raft wal: %w", err)
		}
		return w, w, walCloser{w, meta}, kind, nil
	}
	return nil, nil, nil, "", fmt.Errorf("server: unknown log store %q (one of %v)", kind, LogStoreKinds)
}

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
