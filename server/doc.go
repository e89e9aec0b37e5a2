// Package server is a coord server: a raft member (voter or observer) that
// replicates the state machine of package fsm, holds the client sessions
// connected to it, and serves them over gRPC and ZooKeeper's wire protocol.
//
// It has three jobs, each in its own files:
//
// The replica (knows no connections): raftfsm.go adapts fsm.FSM to raft
// (apply in chunks, snapshots, restore) and completes a proposal's waiter
// only from the entry that carries it (the proposal identity rule); entry.go
// is the log entry envelope; submit.go hands a command to the log; on the
// leader proposer.go batches commands into entries, elsewhere forward.go
// sends them to the leader; commits.go follows the leader's commit position
// so followers apply at once; sync.go is ZooKeeper's sync; internal.go
// serves the server-to-server RPCs; members.go and gossip.go find and
// remember the other servers; netgate.go carries all traffic with them;
// disk.go watches free space.
//
// The session layer: conn.go is a connected session with its ordered
// outbound queue and back-pressure; request.go is the one request path both
// front ends use (writes through the log, reads on a view under the apply
// lock, watches); touch.go and duties.go keep sessions alive and expire
// them (only the leader), remove containers and TTL nodes, and add servers;
// leaderloss.go drops the clients of a server cut off from its leader;
// connlimit.go limits connections per address.
//
// The front ends, codecs onto the request path: grpc.go (the Session
// stream), zk.go and zk4lw.go (the ZooKeeper listener and its four-letter
// words), admin.go and http.go (operators).
//
// server.go starts and stops it all; config.go is its Config; metrics.go
// its Prometheus collectors; testing.go the TestCluster other packages'
// tests use. docs/architecture.md follows a write, a read and a watch
// through these files.
package server
