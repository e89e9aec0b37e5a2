package server

import "coord/server/replica"

// ErrDataCorrupt marks a failure of Err that is a log entry or stable
// value of the data directory that did not verify against its checksum
// (errors.Is); any other failure of Err is a write that failed.
var ErrDataCorrupt = replica.ErrCorrupt

// Failed returns a channel closed when this server's data directory can no
// longer be trusted: a write of the raft log or stable store failed (after
// a failed fsync the disk may have dropped data it reported written, so the
// store takes no more writes) or an entry did not verify. The failure is
// logged at Error when it happens; the server should then be closed and the
// process end (cmd/coord does). Never closed with Config.Stores.
func (s *Server) Failed() <-chan struct{} { return s.rep.StoreFailed() }

// Err is why Failed's channel closed, or nil while it has not.
func (s *Server) Err() error { return s.rep.StoreErr() }
