package replica

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"coord/fsm"
)

// raftFSM adapts fsm.FSM to raft. It applies committed entries in batches
// (raft's apply, or fastApply ahead of it), tells its Observer (the session
// layer, which keeps the watches and the session tracker) of each command
// applied with its result and watch triggers, and completes the request
// that proposed the entry if it came from this server's boot.
//
// mu orders apply against reads: apply holds it exclusively while it changes
// the state and fires watches; a read holds it shared while it takes its view
// and registers its watch. So a read either sees a change or has its watch
// fire for it, and a session always gets an event before a response that
// shows the change.
type raftFSM struct {
	fsm    *fsm.FSM
	origin string   // this boot's origin: only its entries complete waiters
	obs    Observer // told of each command applied and each restore
	log    *slog.Logger
	// onApplied, if set, runs after the applied index moved.
	onApplied func()

	mu      sync.RWMutex
	applied atomic.Uint64 // raft index of the last entry applied

	// applyMu orders the two ways entries reach the state: raft's apply
	// and fastApply. Each applies only entries after applied.
	applyMu sync.Mutex
	fast    atomic.Uint64            // entries applied by fastApply
	want    atomic.Pointer[position] // the furthest commit the leader told of
	// held is the index of the last command or configuration entry this
	// server's log holds (kickingLogStore); 0 after a delete of the tail.
	// gaveUp is the last such index a fresh read stopped waiting for
	// (awaitFresh), so an entry that never commits delays one read only.
	held, gaveUp atomic.Uint64
	freshWait    time.Duration // awaitFresh's bound (defaultFreshWait)
	// committed is the last entry given to apply (so committed), set
	// before it applies: the leader's Commits streams send it on at once,
	// ahead of the responses the apply queues, as ZooKeeper's leader sends
	// COMMIT before it answers.
	committed atomic.Pointer[position]
	commitCh  chan struct{} // closed and replaced whenever committed moves
	kick      chan struct{} // want moved or the log grew
	notices   notices       // the leader's commit-notice connections (notices.go)

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

	// snaps counts snapshots and the log bytes applied since the last;
	// past snapAt, drawn anew for each snapshot between half of snapLimit
	// and snapLimit (0: no limit), apply wakes the snapshotter through
	// snapWake (snapshot.go).
	snaps     snapStats
	snapLimit uint64
	snapAt    atomic.Uint64
	snapWake  chan struct{}

	// pre holds commands decoded as raft read them during the startup
	// replay (predecode.go).
	pre predecoded

	// awaitDurable, if set, waits until this server's log holds every
	// entry up to an index durably (overlapLog.AwaitDurable): the leader
	// applies nothing before.
	awaitDurable func(index uint64) (waited bool, err error)

	// stages times the write path (stages.go); mark is the leader's entry
	// in flight.
	stages StageObserver
	mark   atomic.Pointer[entryMark]
}

// waiter is a request of this server waiting for the entry that carries
// its command, with what identifies that command.
type waiter struct {
	done     func(Result)
	answered time.Time // a forwarded write: when the leader answered
	typ      fsm.CmdType
	session  int64
	owner    string
	path     string
}

func newWaiter(cmd *fsm.Command, done func(Result)) waiter {
	return waiter{done: done, typ: cmd.Type, session: cmd.Session, owner: cmd.Owner, path: cmd.Op.Path}
}

// carries reports whether cmd is the command w waits for.
func (w waiter) carries(cmd *fsm.Command) bool {
	return cmd.Type == w.typ && cmd.Session == w.session && cmd.Owner == w.owner && cmd.Op.Path == w.path
}

// position is a log entry's index and term.
type position struct{ index, term uint64 }

func newRaftFSM(origin string, obs Observer, log *slog.Logger) *raftFSM {
	return &raftFSM{fsm: fsm.New(), origin: origin, obs: obs, log: log, waitCh: make(chan struct{}), commitCh: make(chan struct{}), kick: make(chan struct{}, 1), snapWake: make(chan struct{}, 1), pending: map[uint64]waiter{}, stages: noStages{}, freshWait: defaultFreshWait}
}

// expect registers done to run with the outcome of the entry that carries
// cmd, which this server proposes with seq. When the entry applies, done
// runs inside apply (so it must be quick), which places a write's response
// in its session's stream exactly where ZooKeeper would: after the events
// of earlier entries and before those of later ones.
func (r *raftFSM) expect(seq uint64, cmd *fsm.Command, done func(Result)) {
	r.waitMu.Lock()
	r.pending[seq] = newWaiter(cmd, done)
	r.waitMu.Unlock()
}

// complete delivers the outcome of seq once (apply or failure, whichever
// comes first).
func (r *raftFSM) complete(seq uint64, ar Result) {
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
func (r *raftFSM) completeApplied(seq uint64, cmd *fsm.Command, ar Result) {
	r.waitMu.Lock()
	w, ok := r.pending[seq]
	delete(r.pending, seq)
	r.waitMu.Unlock()
	if !ok {
		return
	}
	if !w.carries(cmd) {
		r.mismatched.Add(1)
		r.log.Error("an entry of this server's origin carries another command than its waiter's; failing the request",
			"seq", seq, "index", ar.Index, "entry_type", cmd.Type, "waiter_type", w.typ)
		w.done(Result{Err: ErrProposalMismatch})
		return
	}
	if !w.answered.IsZero() {
		r.stages.ObserveStage(StageLocalApply, time.Since(w.answered))
	}
	w.done(ar)
}

// plantedFollowerRead is nil except in builds with the jepsenplanted tag
// (planted_jepsen.go), where it picks the forwarded writes a follower or
// observer answers as soon as the leader reports them committed, before it
// has applied them: a read the session sends next may then miss its own
// write. A known bug for jepsen/'s read-your-writes checker to find.
var plantedFollowerRead func(typ fsm.CmdType) bool

// plantedCompleteEarly completes seq, if plantedFollowerRead picks its
// command, with an empty result of the entry at index, before this server
// applies it (the apply then finds no waiter).
func (r *raftFSM) plantedCompleteEarly(seq, index uint64) {
	r.waitMu.Lock()
	w, ok := r.pending[seq]
	if ok && plantedFollowerRead(w.typ) {
		delete(r.pending, seq)
	} else {
		ok = false
	}
	r.waitMu.Unlock()
	if ok {
		w.done(Result{Index: index})
	}
}

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
		w.done(Result{Err: err})
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
	if r.onApplied != nil {
		r.onApplied()
	}
}

// Apply implements raft.FSM.
func (r *raftFSM) Apply(l *raft.Log) interface{} { return r.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM.
func (r *raftFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if r.awaitDurable != nil && len(logs) > 0 {
		// On a leader raft counts its own append toward the commit before
		// it is durable (overlap.go): apply, answer and tell followers only
		// once it is.
		start := time.Now()
		waited, err := r.awaitDurable(logs[len(logs)-1].Index)
		if err != nil {
			r.log.Error("not applying entries this server's log does not hold durably", "first", logs[0].Index, "last", logs[len(logs)-1].Index, "err", err)
			return make([]interface{}, len(logs))
		}
		if waited {
			r.stages.ObserveStage(StageDurableWait, time.Since(start))
		}
	}
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
			p := position{index: l.Index, term: l.Term}
			r.notices.send(p) // before the apply, so before any answer
			r.publishCommitted(p)
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
			r.countApplied(l)
		}
		r.applied.Store(l.Index)
		moved = true
	}
	r.mu.Unlock()
	r.forgetDecoded(logs[0].Index, logs[len(logs)-1].Index)
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

// awaitLearned waits, at most learnedWait, until this server has applied
// the commits the leader has told it of (learnCommit): a read that comes in
// after a commit notice shows what the notice announced, as on ZooKeeper,
// whose follower applies a COMMIT before it reads the next request.
func (r *raftFSM) awaitLearned() {
	if p := r.want.Load(); p != nil {
		r.awaitApplied(p.index, learnedWait)
	}
}

// learnedWait bounds awaitLearned: about a local fsync, for a notice that
// came before the entry it announces was stored here.
const learnedWait = 2 * time.Millisecond

// awaitFresh waits, at most its bound, until this follower has applied
// every command its log held when the read came in, and every commit the
// leader told it of: a write another client was told succeeded is in this
// log (the leader answers only after a majority stored it; a follower that
// is not among them usually has it too) and its commit notice is on its
// way, so a read here after the writer's ack shows the write, as it does
// on ZooKeeper nearly always. An entry whose commit does not come within
// its bound (its leader was deposed, the notices stalled) is not waited
// for again.
func (r *raftFSM) awaitFresh() {
	target := r.held.Load()
	if p := r.want.Load(); p != nil && p.index > target {
		target = p.index
	}
	if target <= r.gaveUp.Load() {
		return
	}
	if !r.awaitApplied(target, r.freshWait) {
		for {
			g := r.gaveUp.Load()
			if g >= target || r.gaveUp.CompareAndSwap(g, target) {
				return
			}
		}
	}
}

// defaultFreshWait bounds awaitFresh: a few commit latencies of a loaded
// cluster.
const defaultFreshWait = 2 * time.Millisecond

// awaitApplied waits, at most wait, until applied reaches index, and
// reports whether it did.
func (r *raftFSM) awaitApplied(index uint64, wait time.Duration) bool {
	var timer *time.Timer
	for {
		ch := r.appliedChanged()
		if index <= r.applied.Load() {
			return true
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		}
	}
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
	start := time.Now()
	r.raftDone(l.Data, start)
	defer func() { r.stages.ObserveStage(StageApply, time.Since(start)) }()
	cmds, ok := r.takeDecoded(l)
	if !ok {
		var err error
		if cmds, err = decodeCommands(l.Data); err != nil {
			r.undecodable(l, err) // before any of its commands applies
		}
	}
	for _, dc := range cmds {
		r.applyOne(l, dc.entryCmd, dc.cmd)
	}
}

// applyOne applies one command of entry l.
func (r *raftFSM) applyOne(l *raft.Log, ec entryCmd, cmd *fsm.Command) {
	res, triggers := r.fsm.Apply(l.Term, cmd)
	r.obs.Applied(cmd, res, triggers)
	if ec.origin == r.origin {
		r.completeApplied(ec.seq, cmd, Result{Res: res, Index: l.Index})
	}
}

// undecodable stops the server: one that cannot read the log must not go
// on and diverge.
func (r *raftFSM) undecodable(l *raft.Log, err error) {
	r.log.Error("cannot decode committed log entry; stopping", "index", l.Index, "err", err)
	panic(fmt.Sprintf("coord: undecodable log entry %d: %v", l.Index, err))
}

// Snapshot implements raft.FSM. raft calls it between applies, so the view
// and the applied index agree.
func (r *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	// fastApply may be ahead of raft: the snapshot carries the index it
	// really holds, and a restore skips the entries up to there.
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	return &fsmSnapshot{r: r, view: r.fsm.View(), index: r.applied.Load(), bytes: r.snaps.sinceBytes.Load()}, nil
}

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
		// Read to the end all the same: the snapshot store checks the
		// file's CRC as it is read, and the index just read is only
		// known good once that check passed.
		if _, err := io.Copy(io.Discard, br); err != nil {
			return fmt.Errorf("server: reading snapshot: %w", err)
		}
		r.log.Warn("not restoring a snapshot that is not ahead of the state; keeping the state",
			"snapshot_index", index, "applied_index", applied)
		return nil
	}
	var skipped map[uint64]waiter
	r.mu.Lock()
	resume := suspendCollector()
	err = r.fsm.RestorePipelined(br, decodeAside)
	resume()
	if err == nil {
		r.applied.Store(index)
		r.restored(index)
		// Taken with the state swapped, so a request that arrives after
		// the swap is not among them.
		skipped = r.takePending()
		r.obs.Restored(r.fsm.View())
	}
	r.mu.Unlock()
	r.signalApplied()
	if len(skipped) > 0 {
		r.skipped.Add(uint64(len(skipped)))
		r.log.Info("snapshot installed; failing the requests that waited for entries it may hold", "requests", len(skipped))
	}
	failPending(skipped, ErrSnapshotInstalled)
	return err
}

// The collector is off while a snapshot is restored (suspendCollector):
// each collection would mark the tree built so far, to find nearly no
// garbage, since nearly all a restore allocates is the tree. At 10M znodes
// that is several collections marking up to 2.7 GB on the two cores the
// restore uses. A memory limit (GOMEMLIMIT) still holds: the runtime
// collects when the heap reaches it. Servers in one process (tests)
// restore at once: the first to start turns the collector off, the last
// to end puts back the setting found.
var collector struct {
	mu        sync.Mutex
	suspended int
	percent   int
}

func suspendCollector() (resume func()) {
	collector.mu.Lock()
	if collector.suspended == 0 {
		collector.percent = debug.SetGCPercent(-1)
	}
	collector.suspended++
	collector.mu.Unlock()
	return func() {
		collector.mu.Lock()
		collector.suspended--
		if collector.suspended == 0 {
			debug.SetGCPercent(collector.percent)
		}
		collector.mu.Unlock()
	}
}

// decodeAside runs a restore's decoding on a goroutine of its own, beside
// the goroutine building the tree (fsm.RestorePipelined): a restart's
// restore is the restart, and it has both cores to itself.
func decodeAside(decode func()) { go decode() }

// fsmSnapshot streams a view: a uvarint applied index, then fsm's stream.
// bytes is the count of log bytes applied since the last snapshot that the
// view includes.
type fsmSnapshot struct {
	r     *raftFSM
	view  *fsm.View
	index uint64
	bytes uint64
}

// Persist writes the snapshot on a thread of its own at a lower scheduling
// priority (snapshotNice, Linux only): encoding a large tree takes a core for
// seconds, and the writes that go on meanwhile, on this server and on others
// sharing its cores, should get the CPU first. The thread's priority cannot
// be raised back without privilege, so the goroutine ends locked to it and
// the Go runtime retires the thread.
func (f *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := lowerThreadPriority(); err != nil {
			f.r.log.Debug("cannot lower the snapshot thread's priority", "err", err)
		}
		errc <- f.persist(sink)
	}()
	return <-errc
}

func (f *fsmSnapshot) persist(sink raft.SnapshotSink) error {
	start := time.Now()
	cw := &countingWriter{w: sink}
	bw := bufio.NewWriterSize(cw, 1<<20)
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
	if err := sink.Close(); err != nil {
		return err
	}
	f.r.persisted(f.index, f.bytes, cw.n, time.Since(start))
	return nil
}

func (f *fsmSnapshot) Release() {}
