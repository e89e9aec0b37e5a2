package replica

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/hashicorp/raft"

	"coord/fsm"
	"coord/server/internal/logbridge"
)

// RestoreDataDir prepares an empty data directory to start a new cluster
// from a saved snapshot (the Admin service's SaveSnapshot stream, in the
// format of the servers' raft snapshots): it checks the snapshot by
// loading it, then writes it into the directory's raft snapshot store as
// the state of a one-voter cluster of server id at raftAddr. A server
// started on that directory with that id (no bootstrap needed) elects
// itself and serves the restored state; add the other servers to it. It
// returns the snapshot's raft index and the state's digest. logStore
// names the raft log store the directory gets ("": DefaultLogStore).
func RestoreDataDir(snapshot, dataDir, id, raftAddr, logStore string, log *slog.Logger) (uint64, [32]byte, error) {
	var digest [32]byte
	if id == "" || raftAddr == "" {
		return 0, digest, errors.New("restore: the new server needs an id and a raft address")
	}
	if entries, err := os.ReadDir(dataDir); err == nil && len(entries) > 0 {
		return 0, digest, fmt.Errorf("restore: %s is not empty; restore into a new directory", dataDir)
	}
	f, err := os.Open(snapshot)
	if err != nil {
		return 0, digest, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	index, err := binary.ReadUvarint(br)
	if err != nil || index == 0 {
		return 0, digest, fmt.Errorf("restore: %s does not start with a snapshot index (%v)", snapshot, err)
	}
	state := fsm.New()
	if err := state.RestorePipelined(br, decodeAside); err != nil {
		return 0, digest, fmt.Errorf("restore: %s is not a valid snapshot: %w", snapshot, err)
	}
	digest = state.View().Digest()

	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return 0, digest, fmt.Errorf("restore: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, logbridge.HCLog(log, "snapshot"))
	if err != nil {
		return 0, digest, fmt.Errorf("restore: %w", err)
	}
	// The term of the restored state: 1, and the stable store says so, so
	// the server's first election starts term 2 (a new zxid epoch).
	const term = 1
	cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(raftAddr)}}}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr)) // only encodes the peer list
	sink, err := newDurableSnapshots(snaps, dataDir).Create(raft.SnapshotVersionMax, index, term, cfg, index, trans)
	if err != nil {
		return 0, digest, fmt.Errorf("restore: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err == nil {
		_, err = io.Copy(sink, bufio.NewReaderSize(f, 1<<16))
	}
	if err != nil {
		sink.Cancel()
		return 0, digest, fmt.Errorf("restore: writing the snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return 0, digest, fmt.Errorf("restore: %w", err)
	}
	logs, stable, closer, kind, err := openLogStore(dataDir, logStore, log)
	if err != nil {
		return 0, digest, fmt.Errorf("restore: %w", err)
	}
	defer closer.Close()
	store := newCheckedStore(logs, stable, dataDir, kind, nil) // the term is written checked
	if err := store.SetUint64([]byte("CurrentTerm"), term); err != nil {
		return 0, digest, fmt.Errorf("restore: %w", err)
	}
	return index, digest, nil
}
