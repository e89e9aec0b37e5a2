// Package zkfront is a coord server's ZooKeeper front end: the ZooKeeper
// port, where unmodified ZooKeeper clients reach the same sessions, request
// path and watches as gRPC clients.
//
// It owns the port's listeners (TLS and plaintext on one port, told apart by
// the first byte, and an optional TLS-only port), its connections, the
// translation between jute records and the session layer's messages
// (package server/sessions) in both directions, the four-letter words, and
// the numbers ZooKeeper reports of its port (packets, latencies, each
// connection's last operation). It is a codec and nothing else: every
// request goes through sessions.Conn.Handle, every session is created or
// re-attached by sessions.Layer.Connect, and what a ZooKeeper server would
// answer differently from the session layer's reply is shaped here from the
// request's tag (translate.go) and nowhere else.
//
// The front end depends on the server it fronts only through the Server
// interface (frontend.go): the per-address connection limit it shares with
// the gRPC front end, the server's state the four-letter words report
// (serving, read-only, role, members, the state machine's view,
// /zookeeper/config's quorum), how long a connect waits for a leader, and
// two counters. Package server implements it with a small adapter and
// starts the front end; this package never imports package server.
//
// Files: frontend.go holds Config, the Server interface and the listeners;
// unified.go the port that serves TLS and plaintext; conn.go a connection
// (handshake, reader, writer); translate.go jute requests to the session
// layer's; reply.go the session layer's replies to jute; fourlw.go the
// four-letter words; stats.go the port's counters.
package zkfront
