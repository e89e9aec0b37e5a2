// Package recipes holds the coordination recipes of ZooKeeper's recipes
// guide, Curator and the ZooKeeper book, written once against a small
// connection interface (Conn: create, delete, exists, getData, setData,
// getChildren, multi and watches) so that they run unchanged on coord and on
// any ZooKeeper ensemble. Package coordconn adapts coord's Go client,
// package zkconn github.com/go-zookeeper/zk. Package recipes imports nothing
// of coord but the shared vocabulary (package vocab).
//
// The recipes:
//
//   - Locks: Mutex (exclusive, re-entrant per Mutex value, try-lock,
//     recovery of its node after a lost answer, fencing token), RWMutex
//     (shared read / exclusive write, optionally revocable), Semaphore
//     (counting, with leases).
//   - Leader election: Election (herd-free, events, resignation, the
//     leader's identity readable by all) and LeaderLatch.
//   - Barriers: Barrier and DoubleBarrier.
//   - Queues: Queue (FIFO), with priority and delay variants, blocking take,
//     exactly-once claims.
//   - TwoPhaseCommit, Group (membership and a watched member cache),
//     ConfigNode and UpdateConfig, NameService, Counter, MasterWorker.
//   - Caches: NodeCache and TreeCache.
//
// # Herds and ordering
//
// No recipe polls. Waiting is done on watches, and where many clients wait
// for the same thing in turn (locks, elections, semaphores, queue takers)
// each watches only the one node it waits for, so one change wakes one
// client. Sequential node names are ordered by their parsed number read as
// an unsigned 32-bit value, so the order holds when the server's signed
// counter passes 2^31 and its names turn negative.
//
// # Sessions
//
// A recipe built on ephemeral nodes lives as long as its session. When the
// session is suspended (the connection lost, the session perhaps alive) a
// recipe keeps waiting: its watches are re-registered when the session
// reconnects. When the session expires, its ephemeral nodes are gone: held
// locks, leadership, memberships and queue claims are lost, and the
// recipe's calls return errors matching ErrSessionLost. Each type's
// documentation says what it does in each state.
package recipes
