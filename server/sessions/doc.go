// Package sessions is a coord server's session layer: the client sessions
// connected to the server, on top of its replica (package server/replica).
//
// It owns what a session needs between the front ends and the log: a Conn
// per connected session with its identities, its one ordered outbound
// stream (replies in request order, watch events in apply order, and the
// back-pressure that stops reading a client that does not read its
// replies); the one request path both front ends use (writes submitted to
// the replica and answered from inside apply, reads on a view taken under
// the apply lock, watch registration); the expiry tracker kept in step
// with the log (one copy of each session's timeout); and watch delivery.
// The Layer is the replica's Observer, so an event is queued before any
// reply that shows its change.
//
// The front ends (gRPC's in package server, ZooKeeper's in package
// server/zkfront) are codecs: they translate their wire records to Request
// and ConnectRequest and back from Reply, Event and ConnectReply
// (message.go), and nothing else.
//
// The layer depends on its replica only through the Replica interface
// (replica.go), which says what it relies on; a server's raft member
// (*replica.Replica) satisfies it, and the transcript tests run the layer
// on a fake one with no raft, network or disk (testdata/README.md).
//
// Files: layer.go holds the Layer, its Config and the Observer side
// (Applied, Restored); replica.go the Replica interface; conn.go a
// connected session (Connect, re-attach, its outbox); ops.go the table of
// request kinds (name, write or not, read-only mode, the ZooKeeper op codes
// and gRPC requests that become each); request.go the request path;
// message.go the messages; readonly.go read-only mode.
package sessions
