// Package replica is one raft member of a coord cluster: the raft log and
// its stores, the proposer that batches commands into entries on the
// leader, the forwarder that sends them to the leader from elsewhere, the
// leader's commit stream that lets followers apply at once, and apply
// itself. It knows nothing of client connections.
//
// Its API is small: Submit a command (or Propose and wait) and learn its
// result from the entry that carries it; Read the state with the apply lock
// held shared; WaitApplied or SyncIndex to catch up. An Observer (the
// server's session layer) is told of each command as it applies and of
// each snapshot installed, inside apply, so it can deliver watch events
// before any answer that shows the change.
//
// Files: replica.go opens the stores and raft and holds the API; raftfsm.go
// adapts fsm.FSM to raft (apply in chunks, snapshots, restore) and
// completes a proposal's waiter only from the entry that carries it (the
// proposal identity rule); entry.go is the log entry envelope; submit.go
// hands a command to the log; proposer.go batches commands into entries on
// the leader; forward.go carries a follower's commands to the leader and
// serves the leader's end; commits.go follows the leader's commit position
// so followers apply at once; sync.go is ZooKeeper's sync.
package replica
