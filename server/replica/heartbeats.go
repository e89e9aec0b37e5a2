package replica

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// heartbeatGate wraps raft's network transport so that Close can wait for
// the heartbeats being handled. raft handles a heartbeat on the transport's
// connection goroutine, not on its own: raft.Shutdown does not wait for it,
// and a heartbeat that passed raft's shutdown check but had not yet stored
// a newer term reached a closed stable store and panicked the process
// ("failed to save current term: closed"). Every other RPC goes through
// raft's main goroutine, which Shutdown does wait for.
type heartbeatGate struct {
	*raft.NetworkTransport
	// pipelineWait bounds a pipelined AppendEntries' wait for room
	// (guardedPipeline, pipeline.go).
	pipelineWait time.Duration
	// commitBound, if set, caps the commit index every AppendEntries
	// carries (overlapLog.CommitBound).
	commitBound func() uint64
	// acked, if set, is told of each AppendEntries with entries that a
	// follower answered with success (overlapLog.Acked).
	acked func(id raft.ServerID, term, index uint64)

	mu     sync.RWMutex // read-held while a heartbeat is handled
	closed bool
}

// SetHeartbeatHandler is how raft installs its heartbeat fast path.
func (g *heartbeatGate) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		g.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	g.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if !g.enter() {
			// Unanswered, as raft itself leaves a heartbeat once shut down;
			// the transport's close ends the wait for the answer.
			return
		}
		defer g.mu.RUnlock()
		cb(rpc)
	})
}

func (g *heartbeatGate) enter() bool {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return false
	}
	return true
}

// shut waits for the heartbeats being handled and refuses later ones. Call
// it after raft has shut down and before its stores close.
func (g *heartbeatGate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// AppendEntriesPipeline is the transport's pipeline, guarded against
// hashicorp/raft's hang when its decoder stops (pipeline.go).
func (g *heartbeatGate) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := g.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	gp := newGuardedPipeline(p, g.pipelineWait, id, g.commitBound, g.acked)
	return gp, nil
}

// AppendEntries sends raft's AppendEntries with its commit index capped
// (commitBound).
func (g *heartbeatGate) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	capCommit(args, g.commitBound)
	err := g.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		reportAck(g.acked, id, args, resp)
	}
	return err
}

// reportAck tells acked of a successful answer to an AppendEntries that
// carried entries: the follower holds them durably (its append is
// synchronous). An empty one (a heartbeat, a probe) says nothing new, as
// raft too counts only entries.
func reportAck(acked func(raft.ServerID, uint64, uint64), id raft.ServerID, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if acked != nil && resp.Success && len(args.Entries) > 0 {
		acked(id, args.Term, args.Entries[len(args.Entries)-1].Index)
	}
}

// capCommit lowers args' commit index to bound's, if bound is set: a
// follower applies no entry the leader does not yet hold durably
// (overlap.go).
func capCommit(args *raft.AppendEntriesRequest, bound func() uint64) {
	if bound != nil {
		args.LeaderCommitIndex = min(args.LeaderCommitIndex, bound())
	}
}
