// Package server is a coord server: a raft member (voter or observer) that
// replicates the state machine of package fsm, holds the client sessions
// connected to it, and serves them over gRPC and ZooKeeper's wire protocol.
//
// It has three jobs:
//
// The replica, package server/replica (knows no connections): the raft
// log, the proposer, the forwarder, the commit stream and apply, behind
// Submit, Read and WaitApplied, telling the session layer of each change
// through its Observer interface. Around it, in this package: netgate.go
// carries all traffic with the other servers (raft's stream layer is
// handed to the replica); internal.go serves the server-to-server RPCs;
// members.go, peers.go and gossip.go find and remember the other servers;
// disk.go watches free space.
//
// The session layer, package server/sessions: connected sessions with
// their ordered outbound streams and back-pressure, the one request path
// (writes through the replica, reads on a view under the apply lock,
// watches), the expiry tracker and watch delivery, behind Connect and
// Conn.Handle; it is the replica's Observer. Around it, in this package:
// touch.go reports the sessions heard from here to the leader; duties.go
// runs the leader's duties (expire sessions, remove containers and TTL
// nodes, add servers); leaderloss.go drops the clients of a server cut off
// from its leader; connlimit.go limits connections per address (both
// front ends).
//
// The front ends, codecs onto the session layer's messages: grpc.go (the
// Session stream, protobuf) and package server/zkfront (the ZooKeeper
// port, jute, four-letter words), which sees this package only through its
// zkfront.Server interface: zk.go implements it and starts the front end;
// admin.go and http.go serve operators.
//
// server.go starts and stops it all; config.go is its Config; metrics.go
// its Prometheus collectors; testing.go the TestCluster other packages'
// tests use. docs/architecture.md follows a write, a read and a watch
// through these files.
package server
