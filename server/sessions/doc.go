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
// The front ends (in package server) are codecs: they translate their wire
// records to Request and ConnectRequest and back from Reply, Event and
// ConnectReply (message.go), and nothing else.
//
// Files: layer.go holds the Layer, its Config and the Observer side
// (Applied, Restored); conn.go a connected session (Connect, re-attach,
// its outbox); request.go the request path; message.go the messages.
package sessions
