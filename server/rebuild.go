package server

import (
	"log/slog"
	"time"

	"coord/server/replica"
)

// SetAsideRaftState moves this data directory's raft state (wal/ or
// raft.db, snapshots/) into corrupt-<time>/ in it and returns that
// directory ("" if there was none): what coord -rebuild does before it
// starts the server empty with Config.Rebuild. See docs/deploy.md, "A
// corrupt data directory".
func SetAsideRaftState(dataDir string, now time.Time) (string, error) {
	return replica.SetAsideRaftState(dataDir, now)
}

// VerifyDataDir reads a data directory's raft log, stable store and
// snapshots back as a starting server does and says what does not verify
// (nil: all of it does); held says whether it holds raft state at all.
// No server may run on the directory meanwhile.
func VerifyDataDir(dataDir string, log *slog.Logger) (held bool, err error) {
	return replica.VerifyDataDir(dataDir, log)
}
