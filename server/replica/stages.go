package replica

import (
	"time"
)

// Stage is a part of a write's way through coord, timed for the
// coord_write_stage_seconds histograms (docs/benchmarks.md shows the
// breakdown). Each stage is observed on the server where it happens, so a
// write through a follower shows in the follower's session, forward,
// local_apply and reply stages and in the leader's propose_queue, raft and
// apply stages. Timing is time.Now at the stage boundaries, carried on
// structures the request has anyway; nothing is allocated per request. The
// fsm's apply itself stays free of clocks: apply is timed around it.
type Stage uint8

const (
	// StageSession: the session layer took the request from the front end
	// → it handed the command to the replica (Submit).
	StageSession Stage = iota
	// StageForward (follower, observer): Submit → the leader's answer to
	// the forwarded write (both hops and the leader's whole part).
	StageForward
	// StageProposeQueue (leader): the proposer took the command → its entry
	// went to raft (ApplyLog); it waits while an entry is in flight.
	StageProposeQueue
	// StageRaft (leader), per entry: ApplyLog → the entry starts applying:
	// raft's queue, the log store's write and fsync (alongside the
	// replication unless SerialAppend), replication to a majority and
	// their fsyncs, the commit.
	StageRaft
	// StageApply (every server), per entry: applying its commands (fsm,
	// watch triggers, completing the waiting requests).
	StageApply
	// StageLocalApply (follower, observer): the leader's answer → this
	// server applied the entry (its commit stream, fast apply).
	StageLocalApply
	// StageReply: the write applied on the session's server → its reply
	// written to the client's connection.
	StageReply
	// StageTotal: the session layer took the request → its reply written.
	StageTotal
	// StageAppend (every server), per call: raft's log store append of
	// one batch of entries, fsync included (on the leader by overlap.go's
	// writer while the entries replicate, or inside raft before it
	// replicates with SerialAppend; on a follower inside its
	// AppendEntries).
	StageAppend
	// StageDurableWait (leader), per batch of entries that had to wait:
	// raft committed the entries → the leader's own append of them was
	// durable (overlap.go); a batch whose append was durable by its commit
	// is not observed.
	StageDurableWait
	NumStages
)

var stageNames = [NumStages]string{"session", "forward", "propose_queue", "raft", "apply", "local_apply", "reply", "total", "append", "durable_wait"}

func (s Stage) String() string {
	if s < NumStages {
		return stageNames[s]
	}
	return "unknown"
}

// StageObserver is told how long a write spent in a stage. It must be
// quick and safe for concurrent use.
type StageObserver interface {
	ObserveStage(s Stage, d time.Duration)
}

type noStages struct{}

func (noStages) ObserveStage(Stage, time.Duration) {}

// entryMark is the leader's in-flight entry as the proposer handed it to
// raft: the first byte of its data (raft hands the apply the same slice)
// and when.
type entryMark struct {
	data *byte
	at   time.Time
}

// markEntry records the entry the proposer just handed to raft.
func (r *raftFSM) markEntry(data []byte, at time.Time) {
	if len(data) > 0 {
		r.mark.Store(&entryMark{data: &data[0], at: at})
	}
}

// raftDone observes StageRaft if l is the marked entry (on the leader that
// proposed it).
func (r *raftFSM) raftDone(data []byte, now time.Time) {
	m := r.mark.Load()
	if m != nil && len(data) > 0 && m.data == &data[0] && r.mark.CompareAndSwap(m, nil) {
		r.stages.ObserveStage(StageRaft, now.Sub(m.at))
	}
}

// forwardAnswered notes when the leader answered a forwarded write, for
// StageLocalApply.
func (r *raftFSM) forwardAnswered(seq uint64, at time.Time) {
	r.waitMu.Lock()
	if w, ok := r.pending[seq]; ok {
		w.answered = at
		r.pending[seq] = w
	}
	r.waitMu.Unlock()
}
