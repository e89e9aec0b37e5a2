// Package watch is the server-local watch registry of a coord server: which
// session watches which path, and which events a committed change delivers to
// whom. It follows Apache ZooKeeper's server (WatchManager and DataTree as of
// 3.9) rule for rule; it owns no network, no clock and no goroutine, and the
// only state it keeps is in memory and local to one server, as in ZooKeeper,
// where watches are not replicated and a client re-registers them
// (setWatches) when it moves to another server.
//
// # Kinds of watches
//
// A session holds, per path, any combination of four kinds:
//   - a data watch, one-shot, set by getData on an existing node and by exists
//     whether or not the node exists;
//   - a child watch, one-shot, set by getChildren on an existing node;
//   - a persistent watch (addWatch mode 0), which fires like a data and a child
//     watch together on its path and stays;
//   - a persistent-recursive watch (addWatch mode 1), which fires for
//     NodeCreated, NodeDeleted and NodeDataChanged on its path and on every
//     descendant, never for NodeChildrenChanged, and stays.
//
// Registering a kind a session already holds on a path is a no-op. Kinds do
// not replace one another: a getData on a path with a persistent watch adds a
// one-shot data watch beside it (ZooKeeper 3.8 overwrote the mode instead, a
// bug fixed by ZOOKEEPER-4466 in 3.9).
//
// # Triggers
//
// Trigger turns one fsm.Trigger into events. NodeCreated and NodeDataChanged
// fire data, persistent and recursive watches on the path; NodeDeleted fires
// every kind on the path; NodeChildrenChanged fires child and persistent
// watches on the path; and recursive watches on any ancestor fire for all but
// NodeChildrenChanged. One-shot watches that match are removed, including
// those of a session whose event was already due from another of its watches.
// Invariants: a session receives at most one event per Trigger (ZooKeeper's
// suppression set for NodeDeleted, and its per-trigger watcher set
// otherwise); the events of one Trigger come out in ascending session id
// order; and an event's Zxid is the zxid of the change (ZooKeeper 3.9 sends
// it in the notification header; 3.8 sent -1).
//
// # Registering from a view
//
// coord serves reads from an immutable fsm.View while the apply goroutine
// goes on triggering, so a watch registered after reading a view at zxid Z
// may miss a change at Z+1 that was triggered in between. The registry keeps
// the last 4096 triggers; AddDataAsOf, AddChildAsOf and Reattach take
// the view's zxid and replay the triggers newer than it against the new
// watches, returning the events those watches would have produced (the watch
// is then consumed, as if it had fired in place). When the history no longer
// reaches back to the view they fail with ErrViewTooOld and the caller retries
// on a newer view; MarkGap declares a jump of the state that produced no
// triggers (a snapshot restore). This relies on the server's ordering rule
// (DESIGN.md): an entry's triggers go through Trigger before readers can see
// its state, and Trigger is called in apply order.
//
// # Memory
//
// A server may hold hundreds of thousands of watches, most of them one
// session's exists watch on one node, so the storage is laid out for that
// case (index.go): each watched path is stored once, in one map slot and one
// 32-byte arena entry that holds a lone watcher inline, and a session lists
// its paths as 4-byte entry ids. 200,000 exists watches from one session
// take about 92 heap bytes each, path strings included (ZooKeeper 3.8: about
// 270; cmd/watchmem measures both); TestMemoryPerWatch bounds it. The
// registry keeps the path string it is given for as long as the path is
// watched, so a caller must not pass one that aliases a larger buffer.
//
// # What the caller owns
//
// Watchers are identified by session id, not by connection as in ZooKeeper,
// so the server must drop a session's watches (RemoveSession) when its
// connection goes away, before the session re-attaches here, and must not
// register watches for a session whose connection is closed (ZooKeeper's
// isDeadWatcher check). Paths are server paths, already validated and with
// any chroot applied. Delivery-time READ ACL filtering of events (ZooKeeper
// checks the node's ACL in ServerCnxn.process, which matters for recursive
// watches) is the server's, as is the order of delivery.
package watch
