package replica

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// hashicorp/raft's leader stores a batch of entries in its own log
// (StoreLogs, with its fsync) and only then hands it to replication, so a
// write waits for two appends in series: the leader's, then a follower's.
// ZooKeeper's leader logs a proposal while it travels to the followers;
// its write waits for the longer of the two. overlapLog gives coord that
// shape without changing raft (docs/benchmarks.md, "Against the floor"):
//
//  1. On the leader, StoreLogs queues the entries and returns at once; a
//     writer of its own stores them in the durable store under it. Until
//     then they are served from memory (GetLog), so replication starts
//     while the leader's fsync runs. The next append waits until what is
//     queued is held by a majority (2.), as raft's order would have it
//     wait for the leader's fsync, so that a loaded leader's next batch
//     gathers what arrives meanwhile; it is queued behind a batch that
//     followers alone hold, so that write's latency does not pass to the
//     next.
//  2. raft now counts the leader toward an entry's commit before the
//     leader holds it durably. So the commit raft computes may run ahead
//     of what a majority holds, and nothing may act on it before a
//     majority of the voters hold the entry durably: the leader once its
//     own append is, or followers alone (ZooKeeper's leader, too, commits
//     on any majority of acknowledgements; the Raft thesis, 10.2.1, allows
//     it). A follower's append is synchronous, so its successful answer to
//     an AppendEntries says it holds those entries durably: the transport
//     reports each (Acked). The leader's apply waits for that majority
//     (AwaitDurable, raftFSM), and every commit position the leader sends
//     is capped at it (CommitBound: raft's LeaderCommitIndex in
//     AppendEntries, through heartbeatGate and guardedPipeline; coord's
//     commit notices and Commits stream send what apply is about to apply,
//     after that wait). An entry raft counted early and a crashed leader
//     then lost was seen by nobody. Followers are counted only for
//     entries of the term whose leader sent them (an earlier term's entry
//     commits with the first of this term, as in raft), and only if
//     they are voters of the latest configuration: every entry still
//     queued was appended after it, since a configuration entry is stored
//     only once all before it are durable (3.). The voters are read from
//     raft once per term (GetConfiguration, off raft's goroutine) and from
//     each configuration entry the leader stores; until then only the
//     leader's own append counts.
//  3. What raft itself acts on at its commit stays exact: a configuration
//     entry (raft takes the next membership change once one commits) is
//     stored synchronously, after everything queued before it. So is every
//     append on a follower (its answer tells the leader the entries are
//     durable), every append while the disk is low (a full disk is then
//     refused back to raft, which retries, instead of failing the server)
//     and every delete that reaches entries not yet durable.
//
// A queued write that fails fails the store and the server stops, as it
// does on any failed log write but one refused for want of space: raft was
// told the entries were stored, and cannot be told otherwise. So the
// replica overlaps only over the stores it opened (checked.go), whose
// failures stop the server anyway; a full disk is kept from the queue by
// the disk check (syncOnly), and one that fills between two checks now
// stops the leader too, with nothing acknowledged lost.
type overlapLog struct {
	raft.LogStore // the durable store

	// leading is set once raft runs and says whether it leads: appends are
	// queued only then.
	leading atomic.Pointer[func() bool]
	// syncOnly, if set, makes every append synchronous while it is true
	// (the disk is low).
	syncOnly func() bool
	// fail, if set, is told of a queued write that failed (the checked
	// store's fail: the server must stop).
	fail func(error)

	// raft, once it runs: the voters are read from it.
	raft atomic.Pointer[raft.Raft]
	self raft.ServerID

	mu   sync.Mutex
	cond *sync.Cond // pend, bound, busy, err or closed changed
	// pend: the entries handed in and not yet durable here, in order:
	// at most two batches (the next is queued only once a majority holds
	// the one before).
	pend   []*raft.Log
	busy   bool // the store is being written (the writer, or a synchronous call)
	err    error
	closed bool
	done   chan struct{} // closed when the writer has returned
	// acks: each follower's last entry known durable there, with the term
	// of the leader that sent it.
	acks map[raft.ServerID]termIndex
	// voters: the voters of the latest configuration known on this
	// leader, for the term and configuration index they were read in
	// (index 0: read from raft, which does not say), and the entries they
	// govern: those after votersFrom.
	voters     []raft.ServerID
	votersAt   termIndex
	votersFrom uint64
	fetching   bool   // a read of the voters from raft is under way
	lastHanded uint64 // the last index raft handed to StoreLogs
	// firstPending is pend[0].Index, or 0 when nothing is pending; bound
	// is the last index a majority of the voters holds durably
	// (MaxUint64 when nothing is pending). Both are read without the lock
	// on every AppendEntries the leader sends and answer it gets.
	firstPending atomic.Uint64
	bound        atomic.Uint64
}

// termIndex is a log position as a leader of term saw it.
type termIndex struct{ term, index uint64 }

func (a termIndex) before(b termIndex) bool {
	return a.term < b.term || (a.term == b.term && a.index < b.index)
}

// errOverlapClosed: the log closed before an entry was durable.
var errOverlapClosed = errors.New("raft log closed before the entry was durable")

func newOverlapLog(store raft.LogStore, self raft.ServerID, syncOnly func() bool, fail func(error)) *overlapLog {
	o := &overlapLog{LogStore: store, self: self, syncOnly: syncOnly, fail: fail, done: make(chan struct{}),
		acks: make(map[raft.ServerID]termIndex)}
	o.cond = sync.NewCond(&o.mu)
	o.bound.Store(math.MaxUint64)
	go o.run()
	return o
}

// queueing reports whether an append of logs may be queued: raft leads
// (raft calls StoreLogs from its main goroutine, which sets its state, so
// the state is exact here), the disk is not low and logs carry no
// configuration.
func (o *overlapLog) queueing(logs []*raft.Log) bool {
	leading := o.leading.Load()
	if leading == nil || !(*leading)() || (o.syncOnly != nil && o.syncOnly()) {
		return false
	}
	for _, l := range logs {
		if l.Type == raft.LogConfiguration {
			return false
		}
	}
	return true
}

// follow has appends queued while r leads, and reads the voters from r.
func (o *overlapLog) follow(r *raft.Raft) {
	leading := func() bool { return r.State() == raft.Leader }
	o.raft.Store(r)
	o.leading.Store(&leading)
}

func (o *overlapLog) StoreLog(l *raft.Log) error { return o.StoreLogs([]*raft.Log{l}) }

func (o *overlapLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	o.mu.Lock()
	if o.err != nil {
		defer o.mu.Unlock()
		return o.err
	}
	if o.queueing(logs) && !o.closed {
		// A leader under load waits here until a majority holds what is
		// queued (usually: its own fsync), as raft's own order would have
		// it wait, so its next batch gathers what arrives meanwhile
		// (without the wait it wrote and replicated many small batches,
		// and 64 sessions' setData ran 9% slower).
		for n := len(o.pend); n > 0 && o.bound.Load() < o.pend[n-1].Index && o.err == nil; n = len(o.pend) {
			o.cond.Wait()
		}
		if o.err != nil {
			defer o.mu.Unlock()
			return o.err
		}
		o.pend = append(o.pend, logs...)
		o.lastHanded = logs[len(logs)-1].Index
		o.wantVoters(logs[0].Term)
		o.recount()
		o.cond.Broadcast()
		o.mu.Unlock()
		return nil
	}
	err := o.exclusive(func() error { return o.LogStore.StoreLogs(logs) })
	if err == nil {
		o.lastHanded = logs[len(logs)-1].Index
		o.learnVoters(logs)
	}
	o.mu.Unlock()
	return err
}

// Acked records that follower id answered an AppendEntries of a leader of
// term with success: it holds the entries up to index durably.
func (o *overlapLog) Acked(id raft.ServerID, term, index uint64) {
	if f := o.firstPending.Load(); f == 0 || index < f {
		return // nothing queued that this could commit
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	at := termIndex{term, index}
	if prev, ok := o.acks[id]; ok && !prev.before(at) {
		return
	}
	o.acks[id] = at
	o.recount()
}

// recount sets firstPending and bound from pend, the acks and the voters,
// and wakes waiters if the bound moved. o.mu is held.
func (o *overlapLog) recount() {
	n := len(o.pend)
	if n == 0 {
		o.firstPending.Store(0)
		if o.bound.Swap(math.MaxUint64) != math.MaxUint64 {
			o.cond.Broadcast()
		}
		return
	}
	first := o.pend[0].Index
	o.firstPending.Store(first)
	bound := first - 1 // what this leader holds durably
	if q := o.followersHold(); q > bound {
		bound = q
	}
	if o.bound.Swap(bound) != bound {
		o.cond.Broadcast()
	}
}

// followersHold is the last queued entry that enough followers hold
// durably to make a majority of the voters without this server, or 0.
// o.mu is held and pend is not empty.
func (o *overlapLog) followersHold() uint64 {
	last := o.pend[len(o.pend)-1]
	if o.votersAt.term != last.Term || len(o.voters) == 0 {
		return 0
	}
	need := len(o.voters)/2 + 1
	var buf [8]uint64
	held := buf[:0]
	for _, id := range o.voters {
		if a, ok := o.acks[id]; ok && id != o.self && a.term == last.Term {
			held = append(held, a.index)
		}
	}
	if len(held) < need {
		return 0
	}
	slices.SortFunc(held, func(a, b uint64) int { return cmp.Compare(b, a) })
	q := min(held[need-1], last.Index)
	first := o.pend[0].Index
	if q < first || q <= o.votersFrom || o.pend[q-first].Term != last.Term {
		// Below what is queued; an entry that may be of an earlier
		// configuration; or an earlier term's entry, which commits only
		// with one of this term, as in raft.
		return 0
	}
	return q
}

// wantVoters starts a read of the voters from raft if those known are not
// of term. o.mu is held.
func (o *overlapLog) wantVoters(term uint64) {
	r := o.raft.Load()
	if o.votersAt.term == term || o.fetching || r == nil {
		return
	}
	o.fetching = true
	go func() {
		// raft sets its latest configuration just before it stores the
		// entry, and does not say at which index: entries handed in
		// before this read may be of the configuration before (until its
		// entry is stored, after them), those handed in after it are of
		// this one or of one whose entry this log stores (learnVoters).
		// So what is read governs only entries after the last handed in
		// once it is read. The term, read before, dates the answer.
		f := r.GetConfiguration()
		err := f.Error()
		o.mu.Lock()
		defer o.mu.Unlock()
		o.fetching = false
		if err != nil || r.CurrentTerm() != term || r.State() != raft.Leader {
			return
		}
		o.setVoters(termIndex{term, 0}, o.lastHanded, f.Configuration())
	}()
}

// learnVoters takes the voters of each configuration entry in logs that
// this leader stored. o.mu is held.
func (o *overlapLog) learnVoters(logs []*raft.Log) {
	leading := o.leading.Load()
	if leading == nil || !(*leading)() {
		return
	}
	for _, l := range logs {
		if l.Type != raft.LogConfiguration {
			continue
		}
		if cfg, ok := decodeConfiguration(l.Data); ok {
			o.setVoters(termIndex{l.Term, l.Index}, l.Index, cfg)
		} else {
			// Unreadable here (raft itself reads it): count only this
			// server's own append for the rest of the term.
			o.voters, o.votersAt = o.voters[:0], termIndex{l.Term, l.Index}
		}
	}
}

// decodeConfiguration is raft.DecodeConfiguration without its panic on
// data it cannot read.
func decodeConfiguration(data []byte) (cfg raft.Configuration, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return raft.DecodeConfiguration(data), true
}

// setVoters keeps cfg's voters, for the entries after from, unless those
// known are of a later position. o.mu is held.
func (o *overlapLog) setVoters(at termIndex, from uint64, cfg raft.Configuration) {
	if at.before(o.votersAt) {
		return
	}
	o.votersFrom = from
	o.voters = o.voters[:0]
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter {
			o.voters = append(o.voters, s.ID)
		}
	}
	o.votersAt = at
	if len(o.pend) > 0 {
		o.recount()
	}
}

// exclusive runs f on the store once every queued entry is durable and
// nothing else writes it. o.mu is held on entry and on return.
func (o *overlapLog) exclusive(f func() error) error {
	for (len(o.pend) > 0 || o.busy) && o.err == nil {
		o.cond.Wait()
	}
	if o.err != nil {
		return o.err
	}
	o.busy = true
	o.mu.Unlock()
	err := f()
	o.mu.Lock()
	o.busy = false
	o.cond.Broadcast()
	return err
}

// run is the writer: it stores each queued batch, until the log closes
// with nothing queued, or a write fails.
func (o *overlapLog) run() {
	defer close(o.done)
	o.mu.Lock()
	defer o.mu.Unlock()
	for {
		for o.err == nil && (o.busy || (len(o.pend) == 0 && !o.closed)) {
			o.cond.Wait()
		}
		if o.err != nil || len(o.pend) == 0 {
			return // failed, or closed with nothing queued
		}
		n := len(o.pend)
		batch := o.pend[:n:n] // appends meanwhile go past it
		o.busy = true
		o.mu.Unlock()
		err := o.LogStore.StoreLogs(batch)
		o.mu.Lock()
		o.busy = false
		if err != nil {
			o.err = fmt.Errorf("%w: storing the leader's entries %d..%d: %w", ErrStoreFailed, batch[0].Index, batch[n-1].Index, err)
			o.cond.Broadcast()
			if o.fail != nil {
				o.fail(o.err)
			}
			return
		}
		rest := copy(o.pend, o.pend[n:]) // a batch queued meanwhile
		clear(o.pend[rest:])
		o.pend = o.pend[:rest]
		o.recount()
		o.cond.Broadcast()
	}
}

// CommitBound is the highest commit index the leader may tell others of:
// the last entry a majority of the voters holds durably (no bound when
// this server holds every entry).
func (o *overlapLog) CommitBound() uint64 { return o.bound.Load() }

// AwaitDurable waits until a majority of the voters holds every entry up
// to index durably (this server counted once its own append is), and
// reports whether it had to wait. It fails if a write failed.
func (o *overlapLog) AwaitDurable(index uint64) (waited bool, err error) {
	if o.bound.Load() >= index {
		return false, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// The writer stores everything queued before it returns, unless a
	// write fails.
	for o.err == nil && o.bound.Load() < index {
		o.cond.Wait()
	}
	return true, o.err
}

func (o *overlapLog) GetLog(index uint64, l *raft.Log) error {
	if f := o.firstPending.Load(); f != 0 && index >= f {
		o.mu.Lock()
		if n := len(o.pend); n > 0 && index >= o.pend[0].Index && index <= o.pend[n-1].Index {
			*l = *o.pend[index-o.pend[0].Index]
			o.mu.Unlock()
			return nil
		}
		o.mu.Unlock()
	}
	return o.LogStore.GetLog(index, l)
}

func (o *overlapLog) FirstIndex() (uint64, error) {
	first, err := o.LogStore.FirstIndex()
	if err == nil && first == 0 {
		first = o.firstPending.Load()
	}
	return first, err
}

func (o *overlapLog) LastIndex() (uint64, error) {
	o.mu.Lock()
	if n := len(o.pend); n > 0 {
		defer o.mu.Unlock()
		return o.pend[n-1].Index, nil
	}
	o.mu.Unlock()
	return o.LogStore.LastIndex()
}

// DeleteRange deletes at once what lies below the entries not yet durable
// (raft compacting the head after a snapshot, while the leader appends);
// a delete that reaches them waits until they are durable.
func (o *overlapLog) DeleteRange(min, max uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if len(o.pend) == 0 || max < o.pend[0].Index {
		o.mu.Unlock()
		err := o.LogStore.DeleteRange(min, max)
		o.mu.Lock()
		return err
	}
	return o.exclusive(func() error { return o.LogStore.DeleteRange(min, max) })
}

// IsMonotonic passes on the store's (raft.MonotonicLogStore).
func (o *overlapLog) IsMonotonic() bool {
	m, ok := o.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// close stores what is queued, stops the writer and waits for it. Call it
// after raft has shut down and before the store closes.
func (o *overlapLog) close() {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
	<-o.done
}
