// Package fsm is coord's replicated state machine: the znode tree, the
// session table and the zxid clock, changed only by applying the commands of
// the replicated log in order.
//
// # Determinism
//
// Apply reads no clock, no random source and no environment, starts no
// goroutine, does no I/O and never depends on map iteration order. Time
// (ctime, mtime, TTL expiry), session passwords and the caller's identities
// travel inside the Command; the zxid comes from the raft term of the entry
// through zxid.Clock. Validation (versions, NodeExists/NoNode/NotEmpty,
// ACLs, sequential names, multi all-or-nothing) happens inside Apply, in
// ZooKeeper's order, so every server reaches the same verdict. Every
// command, failed or not, consumes one zxid, as ZooKeeper's error txns do.
// Replaying the same log from the same snapshot yields byte-identical
// snapshots: View.Digest is the SHA-256 of the snapshot stream.
//
// Decisions that need a clock are made before the log: the leader decides a
// session expired, a container is empty or a TTL node lapsed, and proposes
// CmdCloseSession or CmdDeleteContainer. Apply re-checks what it can
// deterministically (a TTL node is deleted only if the command's time is past
// its mtime plus its ttl).
//
// # Views and snapshots
//
// The tree, its children maps and the session table are persistent
// (copy-on-write) B-trees. View is O(1): it copies the root pointers and
// bumps the writer's generation, after which the writer copies any node
// before changing it. Readers therefore run while Apply runs and always see a
// state after some whole command, never half of a multi; and a snapshot is a
// View streamed out by WriteTo while apply goes on. Restore rebuilds a state
// from such a stream and swaps it in.
//
// # Errors and watches
//
// Apply returns a Result whose Err is nil or an *Error carrying a Code with
// ZooKeeper's numeric value, and the Triggers (path, event type, zxid) the
// command fired, in order; the server's watch registry turns them into
// events. A failed multi fires nothing and changes nothing.
//
// # Encoding
//
// Commands have a stable binary encoding starting with a format byte and a
// type byte whose values are never reused (command.go). A server that meets
// an entry it cannot decode must stop instead of diverging.
package fsm
