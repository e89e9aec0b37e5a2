// Package reconfig is ZooKeeper's dynamic reconfiguration on a coord
// server: the reconfig request (op 16) carried out as raft membership
// changes, and /zookeeper/config, the znode that shows the membership in
// ZooKeeper's format.
//
// A Keeper does three things. Reconfig answers a reconfig request for the
// session layer (sessions.Config.Reconfig): ZooKeeper 3.8's checks in its
// order (disabled, in progress, version, arguments, quorum, ACL), then the
// servers that leave and join through the leader's Admin service, then
// the wait for /zookeeper/config to show the new membership. Reconcile,
// which the leader runs every half tick, keeps /zookeeper/config in step
// with raft's configuration. Quorum renders the quorum part of the
// four-letter word conf from /zookeeper/config (package server/zkfront
// asks for it through package server).
//
// A Keeper sees the raft member only through its Replica interface, which
// *replica.Replica implements, and the server around it only through its
// Server interface (the table of known servers, discovery, the audit log),
// which package server implements with a small adapter; this package never
// imports package server.
//
// Files: keeper.go holds Config, the two interfaces and the Keeper;
// reconfig.go the reconfig request; zkconfig.go /zookeeper/config's text,
// its parsing, Reconcile and Quorum.
package reconfig
