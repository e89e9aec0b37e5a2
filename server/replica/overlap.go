package replica

import (
	"errors"
	"fmt"
	"math"
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
//     while the leader's fsync runs. One batch is in flight at most: the
//     next append waits for it, as it would in raft's order, so that a
//     loaded leader's next batch gathers what arrives meanwhile.
//  2. raft now counts the leader toward an entry's commit before the
//     leader holds it durably. So the commit raft computes may run ahead
//     of what a majority holds, and nothing may act on it before the
//     leader's own append is durable: the leader's apply waits for it
//     (AwaitDurable, raftFSM), and every commit position the leader sends
//     is capped at its durable index (CommitBound: raft's
//     LeaderCommitIndex in AppendEntries, through heartbeatGate and
//     guardedPipeline; coord's commit notices and Commits stream send
//     what apply is about to apply, after that wait). An entry raft
//     counted early and a crashed leader then lost was seen by nobody.
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

	mu   sync.Mutex
	cond *sync.Cond // pend, busy, err or closed changed
	// pend: the one batch handed in and not yet durable (raft's logCache
	// above has cut it to at most storeChunkBytes).
	pend   []*raft.Log
	busy   bool // the store is being written (the writer, or a synchronous call)
	err    error
	closed bool
	done   chan struct{} // closed when the writer has returned
	// firstPending is pend[0].Index, or 0 when nothing is pending: read
	// without the lock on every AppendEntries the leader sends.
	firstPending atomic.Uint64
}

// errOverlapClosed: the log closed before an entry was durable.
var errOverlapClosed = errors.New("raft log closed before the entry was durable")

func newOverlapLog(store raft.LogStore, syncOnly func() bool, fail func(error)) *overlapLog {
	o := &overlapLog{LogStore: store, syncOnly: syncOnly, fail: fail, done: make(chan struct{})}
	o.cond = sync.NewCond(&o.mu)
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

// follow has appends queued while r leads.
func (o *overlapLog) follow(r *raft.Raft) {
	leading := func() bool { return r.State() == raft.Leader }
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
		// One batch in flight at most: a leader under load waits here
		// for the previous batch's fsync, as raft's own order would have
		// it wait, so its next batch gathers what arrives meanwhile
		// (without the wait it wrote and replicated many small batches,
		// and 64 sessions' setData ran 9% slower).
		for len(o.pend) > 0 && o.err == nil {
			o.cond.Wait()
		}
		if o.err != nil {
			defer o.mu.Unlock()
			return o.err
		}
		o.pend = append(o.pend, logs...)
		o.firstPending.Store(o.pend[0].Index)
		o.cond.Broadcast()
		o.mu.Unlock()
		return nil
	}
	err := o.exclusive(func() error { return o.LogStore.StoreLogs(logs) })
	o.mu.Unlock()
	return err
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
		batch := o.pend
		n := len(batch)
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
		// Nothing was queued meanwhile: the next append waits for this one.
		clear(o.pend)
		o.pend = o.pend[:0]
		o.firstPending.Store(0)
		o.cond.Broadcast()
	}
}

// CommitBound is the highest commit index the leader may tell others of:
// the entry before the first one not yet durable here (no bound when all
// are).
func (o *overlapLog) CommitBound() uint64 {
	if f := o.firstPending.Load(); f != 0 {
		return f - 1
	}
	return math.MaxUint64
}

// AwaitDurable waits until every entry up to index this log was handed is
// durable, and reports whether it had to wait. It fails if a write failed.
func (o *overlapLog) AwaitDurable(index uint64) (waited bool, err error) {
	if f := o.firstPending.Load(); f == 0 || f > index {
		return false, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// The writer stores everything queued before it returns, unless a
	// write fails.
	for o.err == nil && len(o.pend) > 0 && o.pend[0].Index <= index {
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
