package server

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// A follower learns that an entry committed from the leader's next
// AppendEntries. raft sends one when there are new entries or, with nothing
// to send, after CommitTimeout; a write through a follower is answered once
// the follower applied it, so an idle cluster would add CommitTimeout to
// every such write. The leader therefore nudges: when it applies entries
// that another server proposed, it appends a barrier (an entry the state
// machine never sees), whose replication carries the new commit index at
// once. At most one nudge is in flight; one wanted meanwhile follows it.
// Under load the barrier rides in the batches that flow anyway.
type nudger struct {
	raft atomic.Pointer[raft.Raft] // set once raft runs

	off atomic.Bool // tests turn nudging off

	mu      sync.Mutex
	running bool
	again   bool
}

// wanted asks for a nudge if this server is the leader.
func (n *nudger) wanted() {
	r := n.raft.Load()
	if r == nil || n.off.Load() || r.State() != raft.Leader {
		return
	}
	n.mu.Lock()
	if n.running {
		n.again = true
		n.mu.Unlock()
		return
	}
	n.running = true
	n.mu.Unlock()
	go n.run(r)
}

func (n *nudger) run(r *raft.Raft) {
	for {
		// The barrier completes once applied here; its error (lost
		// leadership, shutdown) needs nothing: followers then learn the
		// commit index from whoever leads.
		r.Barrier(0).Error()
		n.mu.Lock()
		if !n.again || r.State() != raft.Leader {
			n.running, n.again = false, false
			n.mu.Unlock()
			return
		}
		n.again = false
		n.mu.Unlock()
	}
}
