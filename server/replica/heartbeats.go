package replica

import (
	"errors"
	"sync"
	"sync/atomic"
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
	// stop ends AppendEntries' retries (the replica's closing); send is
	// the transport's AppendEntries (tests replace it).
	stop <-chan struct{}
	send func(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error
	// raft, once NewRaft returned, ends the retries of a term this server
	// no longer leads: raft stops its replication goroutine on a step-down,
	// but not a send in progress, which would go on retrying the old
	// term for up to replicateRetry. leads replaces the check in tests.
	raft  atomic.Pointer[raft.Raft]
	leads func(term uint64) bool

	// running, if set, is set once raft installs its heartbeat handler
	// (raftStream lets connections through from then on).
	running *atomic.Bool

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
	if g.running != nil {
		g.running.Store(true)
	}
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

// A replication AppendEntries that fails to reach its peer is tried again
// every retryEvery for up to replicateRetry before raft hears of the
// failure. raft backs off from a peer by the failures it counted since its
// last success, 10 ms doubling to 10.24 s, and sleeps that long before its
// next try however soon the peer is back. A follower restarting with a
// large tree is unreachable, or connected but silent, for as long as its
// restore takes (10-15 s at 10M znodes on a slow day), which was enough
// for raft's next try to come up to 10 s after the follower could have
// taken it: the restart's first read waited that long. With the retries
// here raft counts about one failure per replicateRetry of absence, and the
// try that reaches the peer is at most retryEvery (or one transport
// timeout, for a peer that accepts and does not answer) after it can.
// Heartbeats keep raft's own handling (their backoff is capped at half the
// heartbeat timeout).
const (
	replicateRetry = 30 * time.Second
	retryEvery     = 100 * time.Millisecond
)

// AppendEntries sends raft's AppendEntries with its commit index capped
// (commitBound), trying a replication request again while its peer cannot
// be reached (replicateRetry).
func (g *heartbeatGate) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	capCommit(args, g.commitBound)
	send := g.send
	if send == nil {
		send = g.NetworkTransport.AppendEntries
	}
	err := send(id, target, args, resp)
	if err != nil && !isHeartbeat(args) {
		deadline := time.Now().Add(replicateRetry)
		for err != nil && !errors.Is(err, raft.ErrTransportShutdown) && time.Now().Before(deadline) {
			select {
			case <-g.stop:
				return err
			case <-time.After(retryEvery):
			}
			if !g.stillLeads(args.Term) {
				return err // raft stopped this replication (a step-down)
			}
			*resp = raft.AppendEntriesResponse{}
			err = send(id, target, args, resp)
		}
	}
	if err == nil {
		reportAck(g.acked, id, args, resp)
	}
	return err
}

// stillLeads reports whether this server still leads in term (true until
// raft is known).
func (g *heartbeatGate) stillLeads(term uint64) bool {
	if g.leads != nil {
		return g.leads(term)
	}
	rf := g.raft.Load()
	return rf == nil || (rf.State() == raft.Leader && rf.CurrentTerm() == term)
}

// isHeartbeat reports raft's heartbeat: an AppendEntries without entries
// or a previous entry.
func isHeartbeat(args *raft.AppendEntriesRequest) bool {
	return len(args.Entries) == 0 && args.PrevLogEntry == 0 && args.PrevLogTerm == 0
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
