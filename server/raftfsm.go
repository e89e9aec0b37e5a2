package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"coord/fsm"
)

// raftFSM adapts fsm.FSM to raft. It applies committed entries in batches,
// hands each entry's watch triggers to the registry and the local sessions,
// updates the session tracker, and completes the request that proposed the
// entry if it came from this server.
//
// mu orders apply against reads: apply holds it exclusively while it changes
// the state and fires watches; a read holds it shared while it takes its view
// and registers its watch. So a read either sees a change or has its watch
// fire for it, and a session always gets an event before a response that
// shows the change.
type raftFSM struct {
	s   *Server
	fsm *fsm.FSM

	mu      sync.RWMutex
	applied atomic.Uint64 // raft index of the last entry applied

	// applyMu orders the two ways entries reach the state: raft's apply
	// and fastApply. Each applies only entries after applied.
	applyMu sync.Mutex
	fast    atomic.Uint64            // entries applied by fastApply
	want    atomic.Pointer[position] // the furthest commit the leader told of
	// committed is the last entry given to apply (so committed), set
	// before it applies: the leader's Commits streams send it on at once,
	// ahead of the responses the apply queues, as ZooKeeper's leader sends
	// COMMIT before it answers.
	committed atomic.Pointer[position]
	commitCh  chan struct{} // closed and replaced whenever committed moves
	kick      chan struct{} // want moved or the log grew

	waitMu  sync.Mutex
	waitCh  chan struct{} // closed and replaced whenever applied moves
	pending map[uint64]waiter
	// mismatched counts entries of this boot's origin whose command was not
	// the one their waiter proposed (never, unless origins repeat); such a
	// waiter fails rather than take another request's result.
	mismatched atomic.Uint64
	// skipped counts requests failed because a snapshot was installed
	// while they waited.
	skipped atomic.Uint64
}

// waiter is a request of this server waiting for the entry that carries
// its command, with what identifies that command.
type waiter struct {
	done    func(applyResult)
	typ     fsm.CmdType
	session int64
	owner   string
	path    string
}

func newWaiter(cmd *fsm.Command, done func(applyResult)) waiter {
	return waiter{done: done, typ: cmd.Type, session: cmd.Session, owner: cmd.Owner, path: cmd.Op.Path}
}

// carries reports whether cmd is the command w waits for.
func (w waiter) carries(cmd *fsm.Command) bool {
	return cmd.Type == w.typ && cmd.Session == w.session && cmd.Owner == w.owner && cmd.Op.Path == w.path
}

// position is a log entry's index and term.
type position struct{ index, term uint64 }

type applyResult struct {
	res   fsm.Result
	index uint64
	err   error // the entry never applied (lost leadership, shutdown, ...)
}

func newRaftFSM(s *Server) *raftFSM {
	return &raftFSM{s: s, fsm: fsm.New(), waitCh: make(chan struct{}), commitCh: make(chan struct{}), kick: make(chan struct{}, 1), pending: map[uint64]waiter{}}
}

// expect registers done to run with the outcome of the entry that carries
// cmd, which this server proposes with seq. When the entry applies, done
// runs inside apply (so it must be quick), which places a write's response
// in its session's stream exactly where ZooKeeper would: after the events
// of earlier entries and before those of later ones.
func (r *raftFSM) expect(seq uint64, cmd *fsm.Command, done func(applyResult)) {
	r.waitMu.Lock()
	r.pending[seq] = newWaiter(cmd, done)
	r.waitMu.Unlock()
}

// complete delivers the outcome of seq once (apply or failure, whichever
// comes first).
func (r *raftFSM) complete(seq uint64, ar applyResult) {
	r.waitMu.Lock()
	w, ok := r.pending[seq]
	delete(r.pending, seq)
	r.waitMu.Unlock()
	if ok {
		w.done(ar)
	}
}

// completeApplied completes seq with the result of cmd, which an entry of
// this boot's origin carried, if cmd is the command seq's waiter proposed.
func (r *raftFSM) completeApplied(seq uint64, cmd *fsm.Command, ar applyResult) {
	r.waitMu.Lock()
	w, ok := r.pending[seq]
	delete(r.pending, seq)
	r.waitMu.Unlock()
	if !ok {
		return
	}
	if !w.carries(cmd) {
		r.mismatched.Add(1)
		r.s.log.Error("an entry of this server's origin carries another command than its waiter's; failing the request",
			"seq", seq, "index", ar.index, "entry_type", cmd.Type, "waiter_type", w.typ)
		w.done(applyResult{err: errProposalMismatch})
		return
	}
	w.done(ar)
}

// errProposalMismatch: see raftFSM.mismatched.
var errProposalMismatch = errors.New("server: the log entry for this request carries another command")

// pendingCount is how many proposals of this server wait for their entry.
func (r *raftFSM) pendingCount() int {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	return len(r.pending)
}

// failAll fails every pending proposal (this server stops).
func (r *raftFSM) failAll(err error) { failPending(r.takePending(), err) }

// takePending removes and returns every pending proposal.
func (r *raftFSM) takePending() map[uint64]waiter {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	p := r.pending
	r.pending = map[uint64]waiter{}
	return p
}

func failPending(p map[uint64]waiter, err error) {
	for _, w := range p {
		w.done(applyResult{err: err})
	}
}

// appliedChanged returns a channel closed when the applied index next moves.
func (r *raftFSM) appliedChanged() <-chan struct{} {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	return r.waitCh
}

// committedChanged returns a channel closed when committed next moves.
func (r *raftFSM) committedChanged() <-chan struct{} {
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	return r.commitCh
}

func (r *raftFSM) publishCommitted(p position) {
	r.committed.Store(&p)
	r.waitMu.Lock()
	close(r.commitCh)
	r.commitCh = make(chan struct{})
	r.waitMu.Unlock()
}

func (r *raftFSM) signalApplied() {
	r.waitMu.Lock()
	close(r.waitCh)
	r.waitCh = make(chan struct{})
	r.waitMu.Unlock()
}

// Apply implements raft.FSM.
func (r *raftFSM) Apply(l *raft.Log) interface{} { return r.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM.
func (r *raftFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	r.applyMu.Lock()
	r.applyLocked(logs)
	r.applyMu.Unlock()
	return make([]interface{}, len(logs))
}

// Apply holds the exclusive lock, which every read on this server waits
// for, over at most applyChunkEntries entries or applyChunkBytes of entry
// data at a time, then lets waiting reads in; fastApply also reads the log
// into memory a chunk at a time. An entry is never split: the proposer
// bounds it (maxBatchBytes, or one command of at most MaxRequestBytes).
const (
	applyChunkEntries = 64
	applyChunkBytes   = 1 << 20
)

// applyLocked applies the entries after applied (commands change the
// state; other entries only occupy an index), in chunks. applyMu is held.
func (r *raftFSM) applyLocked(logs []*raft.Log) {
	for i := len(logs) - 1; i >= 0; i-- {
		l := logs[i]
		if l.Index <= r.applied.Load() {
			break
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			r.publishCommitted(position{index: l.Index, term: l.Term})
			break
		}
	}
	for len(logs) > 0 {
		n := chunkLen(logs)
		r.applyChunk(logs[:n])
		logs = logs[n:]
	}
}

// chunkLen is how many of logs the next chunk takes (at least one).
func chunkLen(logs []*raft.Log) int {
	n, size := 0, 0
	for n < len(logs) && n < applyChunkEntries && (n == 0 || size+len(logs[n].Data) <= applyChunkBytes) {
		size += len(logs[n].Data)
		n++
	}
	return n
}

// applyChunk applies one chunk under the exclusive lock. Entries of other
// types (raft's no-ops and barriers, which only fastApply sees: raft hands
// its FSM commands and configurations only) change nothing but are
// applied all the same, so applied always reaches the end of the chunk and
// fastApply always moves on.
func (r *raftFSM) applyChunk(logs []*raft.Log) {
	moved := false
	r.mu.Lock()
	for _, l := range logs {
		if l.Index <= r.applied.Load() {
			continue // fastApply was first
		}
		if l.Type == raft.LogCommand {
			r.applyCommand(l)
		}
		r.applied.Store(l.Index)
		moved = true
	}
	r.mu.Unlock()
	if moved {
		r.signalApplied()
	}
}

// learnCommit records that the entry at p committed (the leader applied or
// is applying it) and has the applier apply up to there as soon as this log
// holds it.
func (r *raftFSM) learnCommit(p position) {
	for {
		cur := r.want.Load()
		if cur != nil && cur.index >= p.index {
			break
		}
		if r.want.CompareAndSwap(cur, &p) {
			break
		}
	}
	r.wakeApplier()
}

// wakeApplier wakes runApplier.
func (r *raftFSM) wakeApplier() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// runApplier applies learned commits (learnCommit) when they are in this
// server's log: at once, or when the log next grows.
func (r *raftFSM) runApplier(logs raft.LogStore, closing <-chan struct{}) {
	for {
		select {
		case <-r.kick:
		case <-closing:
			return
		}
		if p := r.want.Load(); p != nil && p.index > r.applied.Load() {
			r.fastApply(logs, p.index, p.term)
		}
	}
}

// fastApply applies this server's log up to index without waiting for raft
// to learn that it committed: the leader said that the entry at index, of
// term term, committed. If this server's log holds an entry at index with
// that term, raft's log matching property makes its log the leader's up to
// there, so every entry up to index committed and applies here exactly as
// raft would apply it (raft's later apply of the same entries finds them
// applied and skips them). Otherwise nothing happens and raft applies the
// entries when it learns of the commit.
//
// It reads and applies the tail a chunk at a time and lets raft's apply
// (and reads) in between chunks, so a long tail neither sits in memory
// whole nor holds the state locked for as long as it takes.
func (r *raftFSM) fastApply(logs raft.LogStore, index, term uint64) {
	if index <= r.applied.Load() {
		return
	}
	var last raft.Log
	if logs.GetLog(index, &last) != nil || last.Term != term {
		return
	}
	for {
		if !r.fastApplyChunk(logs, index, &last) {
			return
		}
	}
}

// fastApplyChunk applies the next chunk after applied, up to index (last is
// the entry at index). It reports whether there is more to apply.
func (r *raftFSM) fastApplyChunk(logs raft.LogStore, index uint64, last *raft.Log) bool {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	from := r.applied.Load() + 1
	if from > index {
		return false
	}
	batch := make([]*raft.Log, 0, min(index-from+1, applyChunkEntries))
	size := 0
	for i := from; i <= index && len(batch) < applyChunkEntries && (len(batch) == 0 || size < applyChunkBytes); i++ {
		l := last
		if i < index {
			l = new(raft.Log)
			if logs.GetLog(i, l) != nil {
				return false // compacted or not there: leave it to raft
			}
		}
		if len(batch) > 0 && size+len(l.Data) > applyChunkBytes {
			break
		}
		size += len(l.Data)
		batch = append(batch, l)
	}
	r.applyLocked(batch)
	r.fast.Add(uint64(len(batch)))
	return batch[len(batch)-1].Index < index
}

// applyCommand applies the commands of one entry in order.
func (r *raftFSM) applyCommand(l *raft.Log) {
	cmds, err := decodeEntry(l.Data)
	if err != nil {
		r.undecodable(l, err)
	}
	for _, ec := range cmds {
		cmd, err := fsm.DecodeCommand(ec.cmd)
		if err != nil {
			r.undecodable(l, err)
		}
		res, triggers := r.fsm.Apply(l.Term, cmd)
		r.s.afterApply(cmd, res, triggers)
		if ec.origin == r.s.origin {
			r.completeApplied(ec.seq, cmd, applyResult{res: res, index: l.Index})
		}
	}
}

// undecodable stops the server: one that cannot read the log must not go
// on and diverge.
func (r *raftFSM) undecodable(l *raft.Log, err error) {
	r.s.log.Error("cannot decode committed log entry; stopping", "index", l.Index, "err", err)
	panic(fmt.Sprintf("coord: undecodable log entry %d: %v", l.Index, err))
}

// Snapshot implements raft.FSM. raft calls it between applies, so the view
// and the applied index agree.
func (r *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	// fastApply may be ahead of raft: the snapshot carries the index it
	// really holds, and a restore skips the entries up to there.
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	return &fsmSnapshot{view: r.fsm.View(), index: r.applied.Load()}, nil
}

// errSnapshotInstalled fails the requests this server was waiting on when
// it installed a snapshot: their entries may be folded into the snapshot,
// where no entry completes them. Their fate is unknown to this server, so
// the client gets ConnectionLoss, re-attaches and finds out.
var errSnapshotInstalled = errors.New("server: state replaced by a snapshot; outcome unknown")

// Restore implements raft.FSM: it replaces the state with a snapshot's,
// unless the snapshot is not ahead of what this server has applied (raft
// may hand over a snapshot older than what fastApply reached). Every
// request still waiting for its entry fails: an entry the snapshot covers
// never applies here.
func (r *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 1<<16)
	index, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("server: reading snapshot header: %w", err)
	}
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if applied := r.applied.Load(); index <= applied {
		r.s.log.Warn("not restoring a snapshot that is not ahead of the state; keeping the state",
			"snapshot_index", index, "applied_index", applied)
		return nil
	}
	var skipped map[uint64]waiter
	r.mu.Lock()
	err = r.fsm.Restore(br)
	if err == nil {
		r.applied.Store(index)
		// Taken with the state swapped, so a request that arrives after
		// the swap is not among them.
		skipped = r.takePending()
		r.s.afterRestore()
	}
	r.mu.Unlock()
	r.signalApplied()
	if len(skipped) > 0 {
		r.skipped.Add(uint64(len(skipped)))
		r.s.log.Info("snapshot installed; failing the requests that waited for entries it may hold", "requests", len(skipped))
	}
	failPending(skipped, errSnapshotInstalled)
	return err
}

// fsmSnapshot streams a view: a uvarint applied index, then fsm's stream.
type fsmSnapshot struct {
	view  *fsm.View
	index uint64
}

func (f *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	bw := bufio.NewWriterSize(sink, 1<<20)
	var hdr [binary.MaxVarintLen64]byte
	_, err := bw.Write(hdr[:binary.PutUvarint(hdr[:], f.index)])
	if err == nil {
		_, err = f.view.WriteTo(bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (f *fsmSnapshot) Release() {}
