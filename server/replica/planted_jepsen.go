//go:build jepsenplanted

package replica

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"

	"coord/fsm"
)

// Planted bugs, for jepsen/ to prove its checkers can fail. Only a binary
// built with -tags jepsenplanted has them, and only with COORD_PLANTED
// naming one (server/sessions/planted_jepsen.go has the session layer's):
//
//	followerread: a follower or observer answers a forwarded data write
//	(create, delete, setData, setACL, multi) once the leader reports it
//	committed, before applying it itself, so the session's next read there
//	may miss its own write.
//
//	reuseorigin: every boot of a server proposes under the same origin
//	(its id and a constant nonce), so after a crash-restart the entries of
//	its previous boots that it replays complete the new boot's requests
//	with the same sequence numbers: new clients are handed old results
//	(the bug per-boot origins fixed; invariant 8).
//
//	nologsync: raft-wal's segment files are never fsynced (a log store
//	that acknowledges what may not be on disk; invariant 11).
//
//	snapshotnosync: a snapshot's files are not fsynced before its
//	directory is renamed into place (and the rename made durable), so a
//	power loss can leave a snapshot that is listed but empty.
//
//	noverify: log entries are taken as read, their checksums unchecked (a
//	server serves and replicates what it cannot verify).
func init() {
	switch os.Getenv("COORD_PLANTED") {
	case "followerread":
		plantedFollowerRead = func(typ fsm.CmdType) bool {
			switch typ {
			case fsm.CmdCreate, fsm.CmdDelete, fsm.CmdSetData, fsm.CmdSetACL, fsm.CmdMulti:
				return true
			}
			return false
		}
	case "reuseorigin":
		plantedReuseOrigin = func() string { return "0000000000000000" }
	case "nologsync":
		plantedSegmentVFS = func(v types.VFS) types.VFS { return noSyncVFS{v} }
	case "snapshotnosync":
		plantedSnapshots = func(dir string, store *raft.FileSnapshotStore) raft.SnapshotStore {
			return &unsyncedSnapshots{FileSnapshotStore: store, dir: dir}
		}
	case "noverify":
		plantedNoVerify = true
	}
}

// noSyncVFS hands out segment files whose Sync does nothing.
type noSyncVFS struct{ types.VFS }

func (v noSyncVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	return noSyncFile{f}, err
}

func (v noSyncVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	return noSyncFile{f}, err
}

type noSyncFile struct{ types.WritableFile }

func (noSyncFile) Sync() error { return nil }

// unsyncedSnapshots writes snapshots in the layout of raft's file snapshot
// store (which lists, opens and reaps them) but renames a snapshot into
// place, and syncs that rename, without syncing its files first.
type unsyncedSnapshots struct {
	*raft.FileSnapshotStore
	dir string
}

func (s *unsyncedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration, confIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	name := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli())
	tmp := filepath.Join(s.dir, name+".tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(tmp, "state.bin"))
	if err != nil {
		return nil, err
	}
	k := &unsyncedSink{store: s, tmp: tmp, f: f, hash: crc64.New(crc64.MakeTable(crc64.ECMA))}
	k.w = bufio.NewWriter(io.MultiWriter(f, k.hash))
	k.meta.SnapshotMeta = raft.SnapshotMeta{Version: version, ID: name, Index: index, Term: term,
		Configuration: conf, ConfigurationIndex: confIndex}
	return k, nil
}

type unsyncedSink struct {
	store *unsyncedSnapshots
	tmp   string
	f     *os.File
	w     *bufio.Writer
	hash  hash.Hash64
	meta  snapshotMeta
	done  bool // closed or cancelled: raft may close a sink its FSM closed
}

func (k *unsyncedSink) ID() string                  { return k.meta.ID }
func (k *unsyncedSink) Write(p []byte) (int, error) { return k.w.Write(p) }

func (k *unsyncedSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	k.f.Close()
	return os.RemoveAll(k.tmp)
}

func (k *unsyncedSink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	if err := k.w.Flush(); err != nil {
		return err
	}
	st, err := k.f.Stat()
	if err != nil {
		return err
	}
	if err := k.f.Close(); err != nil {
		return err
	}
	k.meta.Size, k.meta.CRC = st.Size(), k.hash.Sum(nil)
	b, err := json.Marshal(&k.meta)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(k.tmp, "meta.json"), b, 0o644); err != nil {
		return err
	}
	final := filepath.Join(k.store.dir, k.meta.ID)
	if err := os.Rename(k.tmp, final); err != nil {
		return err
	}
	if err := SyncDir(k.store.dir); err != nil {
		return err
	}
	return k.store.ReapSnapshots()
}
