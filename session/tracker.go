package session

import (
	"container/heap"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Tracker decides when sessions expire, as ZooKeeper's SessionTrackerImpl and
// ExpiryQueue do on the leader. Each session sits in one deadline bucket; a
// bucket's deadline is a multiple of the tick, so the leader checks for expiry
// once per tick and expires a whole bucket at a time.
//
// Time is measured as an offset from the Tracker's creation, so with
// SystemClock it follows Go's monotonic clock and a wall clock step neither
// mass-expires sessions nor keeps them alive. Buckets are multiples of the tick
// counted from that origin.
//
// A session is in one of two states: live (in a bucket, touchable) or closing
// (SetClosing was called, or Expired reported it; touches are refused). A
// closing session stays tracked until Remove, which the server calls when the
// closeSession entry commits, so that in between its connection can still be
// told the session expired rather than that it never existed.
//
// A Tracker is safe for concurrent use.
type Tracker struct {
	clock Clock
	tick  time.Duration
	base  time.Time // origin of all offsets below

	mu       sync.Mutex
	sessions map[int64]*tracked
	buckets  map[time.Duration]*bucket // by deadline offset
	queue    bucketQueue               // the same buckets, soonest deadline first
}

type tracked struct {
	timeout time.Duration
	bucket  *bucket // nil once Expired has taken the session out of its bucket
	closing bool
}

// bucket holds the sessions due at one deadline. A bucket is never empty
// while it is in the queue: the last member to leave removes it, so the queue
// head is always a real next expiry.
type bucket struct {
	deadline time.Duration
	ids      map[int64]struct{}
	index    int // position in queue, kept by bucketQueue
}

// NewTracker returns an empty tracker with the given tick that reads time from
// clock. The tick is the server's tickTime: the granularity of expiry.
func NewTracker(tick time.Duration, clock Clock) (*Tracker, error) {
	if tick <= 0 {
		return nil, fmt.Errorf("session: tracker tick must be > 0, got %v", tick)
	}
	if clock == nil {
		return nil, fmt.Errorf("session: tracker needs a Clock, got nil")
	}
	return &Tracker{
		clock:    clock,
		tick:     tick,
		base:     clock.Now(),
		sessions: make(map[int64]*tracked),
		buckets:  make(map[time.Duration]*bucket),
	}, nil
}

// roundToNextInterval returns the first multiple of tick strictly after off.
// ZooKeeper rounds this way ((t/interval + 1) * interval), so a deadline
// landing exactly on a tick boundary moves to the next one: a session always
// gets at least its full timeout, and up to one tick more.
func (t *Tracker) roundToNextInterval(off time.Duration) time.Duration {
	q := off / t.tick
	if off%t.tick < 0 { // Go truncates toward zero; we need floor for a clock set back before base
		q--
	}
	return (q + 1) * t.tick
}

func (t *Tracker) offset(now time.Time) time.Duration { return now.Sub(t.base) }

// Add starts tracking session id with the given timeout and reports whether it
// was new. Its deadline is now+timeout rounded up to the next tick. Adding a
// session that is already tracked records the new timeout and refiles it by
// that timeout, as ZooKeeper's trackSession does, but leaves its closing state
// alone; this lets a leader whose closeSession proposal failed re-arm an
// expired session so that Expired reports it again.
func (t *Tracker) Add(id int64, timeout time.Duration) bool {
	now := t.offset(t.clock.Now())
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[id]
	if !ok {
		s = &tracked{}
		t.sessions[id] = s
	}
	s.timeout = timeout
	t.file(id, s, t.roundToNextInterval(now+timeout))
	return !ok
}

// Touch records activity on session id: its deadline becomes now+timeout
// rounded up to the next tick. It reports false, and changes nothing, if the
// session is unknown or closing, which is how the server learns to answer
// SessionExpired. As in ZooKeeper's ExpiryQueue.update the new deadline simply
// replaces the old one, so a touch with a shorter timeout than before can move
// a session to an earlier bucket. The timeout is used for this deadline only;
// the session's stored timeout (used by ResetAll) is the one given to Add,
// because that is the one in the replicated session table.
func (t *Tracker) Touch(id int64, timeout time.Duration) bool {
	now := t.offset(t.clock.Now())
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[id]
	if !ok || s.closing {
		return false
	}
	t.file(id, s, t.roundToNextInterval(now+timeout))
	return true
}

// TouchStored is Touch with the session's stored timeout (the one given to
// Add, from the replicated session table). It reports whether the session
// is tracked at all, closing or not; a closing session is not touched.
func (t *Tracker) TouchStored(id int64) bool {
	now := t.offset(t.clock.Now())
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.touchStoredLocked(id, now)
}

// touchStoredLocked is TouchStored at offset now. Callers hold t.mu.
func (t *Tracker) touchStoredLocked(id int64, now time.Duration) bool {
	s, ok := t.sessions[id]
	if ok && !s.closing {
		t.file(id, s, t.roundToNextInterval(now+s.timeout))
	}
	return ok
}

// TouchStoredAll is TouchStored for each of ids under one lock (a
// follower's report of the sessions its clients were heard from). It
// returns the ids that are not tracked at all.
func (t *Tracker) TouchStoredAll(ids []int64) (unknown []int64) {
	now := t.offset(t.clock.Now())
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if !t.touchStoredLocked(id, now) {
			unknown = append(unknown, id)
		}
	}
	return unknown
}

// IDs returns the tracked sessions' ids, live or closing, in no order.
func (t *Tracker) IDs() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]int64, 0, len(t.sessions))
	for id := range t.sessions {
		ids = append(ids, id)
	}
	return ids
}

// Remove stops tracking session id and reports whether it was tracked. The
// server calls it when a closeSession entry for the session commits.
func (t *Tracker) Remove(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[id]
	if !ok {
		return false
	}
	t.unfile(id, s)
	delete(t.sessions, id)
	return true
}

// SetClosing marks session id as closing, so further touches are refused, and
// reports whether the session is tracked. The server calls it when a client
// asks to close its session, before the closeSession entry commits. As in
// ZooKeeper the session keeps its bucket, so if the close has not committed by
// its deadline Expired reports it anyway; proposing a second close of the same
// session must be harmless: fsm has to treat closing a session that is already
// gone as an ordinary result of the entry, not a fault.
func (t *Tracker) SetClosing(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[id]
	if ok {
		s.closing = true
	}
	return ok
}

// Retry puts a session that Expired reported back in a bucket, due a tick
// from now, and reports whether it did: the leader's closeSession for it
// failed before the log (a full queue, a proposal the leader dropped), and
// the session must not stay open for good because of that. A session that
// is no longer tracked (its close committed) or that is not closing is
// left alone.
func (t *Tracker) Retry(id int64, now time.Time) bool {
	off := t.offset(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[id]
	if !ok || !s.closing || s.bucket != nil {
		return false
	}
	t.file(id, s, t.roundToNextInterval(off+t.tick))
	return true
}

// IsClosing reports whether session id is tracked and closing.
func (t *Tracker) IsClosing(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[id]
	return ok && s.closing
}

// Contains reports whether session id is tracked, live or closing.
func (t *Tracker) Contains(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.sessions[id]
	return ok
}

// Deadline returns the deadline of the bucket session id waits in. It reports
// false if the session is unknown or Expired has already taken it out of its
// bucket.
func (t *Tracker) Deadline(id int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[id]
	if !ok || s.bucket == nil {
		return time.Time{}, false
	}
	return t.base.Add(s.bucket.deadline), true
}

// Expired returns the sessions whose bucket deadline is at or before now, in
// ascending id order, so that a leader proposes their closes in the same order
// every time. Like ZooKeeper's SessionTrackerImpl.run, it takes them out of
// their buckets and marks them closing but keeps them tracked: the leader is
// expected to propose closeSession for each, and Remove them when that entry
// commits. A nil result means nothing is due.
//
// now is explicit rather than read from the Clock so that the caller's "wake
// at NextExpiry" loop and its decision use the same instant.
func (t *Tracker) Expired(now time.Time) []int64 {
	off := t.offset(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []int64
	for len(t.queue) > 0 && t.queue[0].deadline <= off {
		b := heap.Pop(&t.queue).(*bucket)
		delete(t.buckets, b.deadline)
		for id := range b.ids {
			s := t.sessions[id]
			s.bucket = nil
			s.closing = true
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // map order is random; the leader's proposals must not be
	return ids
}

// NextExpiry returns the earliest bucket deadline, the time at which Expired
// will next have something to report. It reports false if no session waits in
// a bucket.
func (t *Tracker) NextExpiry() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		return time.Time{}, false
	}
	return t.base.Add(t.queue[0].deadline), true
}

// Len returns the number of tracked sessions, live or closing.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sessions)
}

// ResetAll gives every tracked session a full timeout (its stored one) from
// now and clears every closing mark. A new leader calls it on taking over: the
// old leader's record of who was recently heard from is gone, and ZooKeeper's
// new leader likewise builds a fresh tracker, with no session closing, from the
// session table. A close that the old leader proposed but did not commit is
// then decided afresh.
func (t *Tracker) ResetAll(now time.Time) {
	off := t.offset(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buckets = make(map[time.Duration]*bucket)
	t.queue = nil
	for id, s := range t.sessions {
		s.bucket = nil
		s.closing = false
		t.file(id, s, t.roundToNextInterval(off+s.timeout))
	}
}

// file moves session id into the bucket for deadline, creating the bucket if
// needed. Callers hold t.mu.
func (t *Tracker) file(id int64, s *tracked, deadline time.Duration) {
	if s.bucket != nil && s.bucket.deadline == deadline {
		return // the common heartbeat within one tick: nothing moves
	}
	t.unfile(id, s)
	b, ok := t.buckets[deadline]
	if !ok {
		b = &bucket{deadline: deadline, ids: make(map[int64]struct{})}
		t.buckets[deadline] = b
		heap.Push(&t.queue, b)
	}
	b.ids[id] = struct{}{}
	s.bucket = b
}

// unfile takes session id out of its bucket, dropping the bucket if it is left
// empty so that the queue never holds empty buckets. Callers hold t.mu.
func (t *Tracker) unfile(id int64, s *tracked) {
	b := s.bucket
	if b == nil {
		return
	}
	s.bucket = nil
	delete(b.ids, id)
	if len(b.ids) == 0 {
		heap.Remove(&t.queue, b.index)
		delete(t.buckets, b.deadline)
	}
}

// bucketQueue is a min-heap of buckets by deadline (container/heap). The
// number of buckets is bounded by Max/tick plus a few, so heap operations are
// cheap next to the map work of moving a session.
type bucketQueue []*bucket

func (q bucketQueue) Len() int           { return len(q) }
func (q bucketQueue) Less(i, j int) bool { return q[i].deadline < q[j].deadline }

func (q bucketQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

func (q *bucketQueue) Push(x any) {
	b := x.(*bucket)
	b.index = len(*q)
	*q = append(*q, b)
}

func (q *bucketQueue) Pop() any {
	old := *q
	n := len(old)
	b := old[n-1]
	old[n-1] = nil // let the bucket be collected
	b.index = -1
	*q = old[:n-1]
	return b
}
