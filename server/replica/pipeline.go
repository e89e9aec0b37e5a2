package replica

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// hashicorp/raft's pipelined replication can hang a leader's replication
// to one follower for good. The leader writes AppendEntries on the
// pipeline (pipelineSend) while the transport's decoder reads the answers
// and hands them, one at a time, to raft's pipelineDecode (the transport's
// default of 2 requests in flight leaves its channels unbuffered). When
// pipelineDecode stops (it returns on an answer that failed: the follower
// refused, restarted or went away), nothing takes answers any more: the
// decoder blocks handing over its next one, and the next pipelineSend
// blocks handing its request to the decoder. Only closing the pipeline
// ends that wait, and the loop that would close it is the one blocked. The
// follower still gets heartbeats (another goroutine), so nobody calls an
// election, but it gets no entries and learns no commits: seen in jepsen's
// fsync-error runs as a restarted follower that never caught up, and as a
// follower that held every entry but never applied the last (goroutine
// dumps: pipelineSend in netPipeline.AppendEntries, decodeResponses
// sending to its done channel, no pipelineDecode).
//
// guardedPipeline keeps that wait bounded: it passes the answers on to raft
// itself, and lets at most pipelineSlots requests be sent and not yet taken
// by raft (the transport's own depth, so a send through it never waits on
// the transport for long: at most for the answer before it). A request
// that finds no slot within wait fails; pipelineSend logs it and returns,
// raft closes the pipeline and goes back to plain AppendEntries for that
// follower (and pipelines again once one succeeds).
type guardedPipeline struct {
	raft.AppendPipeline
	slots chan struct{}
	out   chan raft.AppendFuture
	done  chan struct{}
	once  sync.Once
	wait  time.Duration
	// commitBound caps each request's commit index (capCommit).
	commitBound func() uint64
	// acked is told of each successful answer (reportAck) from id.
	acked func(id raft.ServerID, term, index uint64)
	id    raft.ServerID
}

// transportTimeout bounds each RPC of raft's network transport.
const transportTimeout = 10 * time.Second

// pipelineSlots bounds the requests sent and not yet taken by raft: the
// transport's depth (coord leaves MaxRPCsInFlight at its default).
const pipelineSlots = raft.DefaultMaxRPCsInFlight

// errPipelineStalled: no answer of the follower was taken within the wait.
var errPipelineStalled = errors.New("replication pipeline stalled: no answer taken in time")

func newGuardedPipeline(p raft.AppendPipeline, wait time.Duration, id raft.ServerID, commitBound func() uint64, acked func(raft.ServerID, uint64, uint64)) *guardedPipeline {
	if wait <= 0 {
		wait = transportTimeout
	}
	g := &guardedPipeline{AppendPipeline: p, slots: make(chan struct{}, pipelineSlots),
		out: make(chan raft.AppendFuture), done: make(chan struct{}), wait: wait,
		id: id, commitBound: commitBound, acked: acked}
	go g.forward()
	return g
}

func (g *guardedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	select {
	case g.slots <- struct{}{}:
	default:
		t := time.NewTimer(g.wait)
		defer t.Stop()
		select {
		case g.slots <- struct{}{}:
		case <-t.C:
			return nil, errPipelineStalled
		case <-g.done:
			return nil, raft.ErrPipelineShutdown
		}
	}
	capCommit(args, g.commitBound)
	f, err := g.AppendPipeline.AppendEntries(args, resp)
	if err != nil {
		<-g.slots
		return nil, err
	}
	return f, nil
}

// Consumer is where raft takes the answers, in order.
func (g *guardedPipeline) Consumer() <-chan raft.AppendFuture { return g.out }

// forward hands the transport's answers to raft (out is unbuffered), freeing
// a slot as raft takes each.
func (g *guardedPipeline) forward() {
	in := g.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			// The transport hands over a future once its answer is in.
			if g.acked != nil && f.Error() == nil {
				reportAck(g.acked, g.id, f.Request(), f.Response())
			}
			select {
			case g.out <- f:
				<-g.slots
			case <-g.done:
				return
			}
		case <-g.done:
			return
		}
	}
}

func (g *guardedPipeline) Close() error {
	g.once.Do(func() { close(g.done) })
	return g.AppendPipeline.Close()
}
