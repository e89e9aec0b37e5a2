// Package jepsen tests coord the way Jepsen tests databases: a cluster of
// real coord processes (built from ./cmd/coord), concurrent clients speaking
// the ZooKeeper protocol through go-zookeeper, faults injected on a seeded
// schedule (kill -9 and restart of one server, the leader or a majority,
// SIGSTOP/SIGCONT, network partitions between network namespaces including
// bridge and one-way ones, packet loss and a slow link (without root: the
// same faults on a TCP proxy per peer link, proxy.go), membership changes
// through the Admin RPCs, a full and a slow disk on one server, restarts
// under a shifted monotonic clock), a recorded history of every operation with its
// invocation and completion time, and checkers that judge the history
// against the invariants of DESIGN.md once the faults are healed.
//
// A run (Run) always ends: the workloads stop at the deadline, the faults
// are healed, every process this package started is killed and every
// namespace, link and iptables rule it made is removed, on every exit path.
// An operation whose outcome the client cannot know (a timeout, a dropped
// connection) is indeterminate ("info"): the checkers treat it as possibly
// applied, never as a pass or a failure.
//
// The checkers:
//   - register: get/set/compare-and-set (versioned setData) on a few znodes,
//     checked for linearizability by porcupine; a failure writes porcupine's
//     HTML visualisation into the report.
//   - sessions: every session id is handed to one client only, across the
//     whole run and across server restarts, also to clients that connect to
//     a restarted server at once (invariant 8); a session reads its own
//     ephemeral while it lives; no ephemeral outlives its session, also
//     sessions whose clients vanished without closing (invariant 4).
//   - ryw: a session pinned to one server (a follower or observer too)
//     reads back its own acknowledged write, without sync.
//   - sequential: sequential names are unique, increase in real-time order,
//     and no acknowledged create is lost (invariants 1 and 5).
//   - gosessions, watches, lock, queue, minority (coord's Go client over
//     gRPC, with a tap of every message's zxid): a session's zxids never go
//     back and it reads its writes, across server moves; watch events come
//     once, in zxid order, before the data; the recipes lock (fencing tokens
//     in a checker-side register) and queue (exactly once); a client of a
//     cut-off server is told Disconnected before its session expires.
//
// The runner is ./jepsen/cmd/jepsen; docs/jepsen.md describes both.
package jepsen
