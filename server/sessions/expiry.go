package sessions

import (
	"sync"
	"time"

	"coord/fsm"
	"coord/server/replica"
)

// maxClosesInFlight bounds the expired sessions' closes in the log's
// pipeline at once. Sessions expire in bursts (every session of a tick's
// bucket together: 50,000 clients that vanish at once fall due within
// seconds of each other), and proposed all at once they queue ahead of
// every client write that comes after them: at full scale one setData
// waited 0.5-0.7 s behind such a burst. With at most this many in flight
// a write waits behind a batch of closes, and the closes still go out as
// fast as the log takes them (the next is proposed as each applies). 64,
// not 256: with 10,000 expiring on 3 servers the worst write during the
// expiries was 16-24 ms (about the worst with no expiry) against 31-49 ms
// with 256, and the last close applied no later (docs/benchmarks.md).
const maxClosesInFlight = 64

// expiry queues the closes of expired sessions (Layer.Expire) and keeps at
// most maxClosesInFlight of them proposed and not yet done.
type expiry struct {
	mu       sync.Mutex
	queue    []int64
	inFlight int
	pumping  bool // a pump is proposing (it picks up what others add)
}

// Expire proposes closing every session whose deadline passed (on the
// leader, the only server that expires sessions), at most
// maxClosesInFlight at a time.
func (l *Layer) Expire(now time.Time) {
	ids := l.tracker.Expired(now)
	if len(ids) == 0 {
		return
	}
	due := ids[:0]
	view := l.rep.View()
	for _, id := range ids {
		// Where it was connected (its server's origin, "id#nonce/conn")
		// tells an operator which server's clients went silent.
		info, _ := view.Session(id)
		l.log.Info("session expired", "session", sessionHex(id), "connection", info.Owner)
		if plantedKeepEphemerals != nil && plantedKeepEphemerals() {
			// A planted bug (jepsenplanted builds only): the session is
			// dropped here but never closed in the log, so its ephemerals
			// stay.
			l.tracker.Remove(id)
			continue
		}
		due = append(due, id)
	}
	l.expiry.mu.Lock()
	l.expiry.queue = append(l.expiry.queue, due...)
	l.expiry.mu.Unlock()
	l.pumpCloses()
}

// pumpCloses proposes queued closes while there is room; one pump at a
// time (a call while one runs returns at once, and the running one sees
// what was added).
func (l *Layer) pumpCloses() {
	e := &l.expiry
	e.mu.Lock()
	if e.pumping {
		e.mu.Unlock()
		return
	}
	e.pumping = true
	for e.inFlight < maxClosesInFlight && len(e.queue) > 0 {
		id := e.queue[0]
		e.queue = e.queue[1:]
		if !l.tracker.IsClosing(id) {
			continue // closed meanwhile, or re-armed by a new leader's TakeOver
		}
		if !l.rep.IsLeader() {
			// Leadership went: the next leader expires sessions on its
			// own clock. Put the rest back as a failed close would.
			now := l.clock.Now()
			for _, id := range append([]int64{id}, e.queue...) {
				l.tracker.Retry(id, now)
			}
			e.queue = nil
			break
		}
		e.inFlight++
		e.mu.Unlock()
		l.submitClose(id)
		e.mu.Lock()
	}
	if len(e.queue) == 0 {
		e.queue = nil // let the backing array go
	}
	e.pumping = false
	e.mu.Unlock()
}

// submitClose proposes closing the expired session id; when it is done,
// the next queued close is proposed (by a goroutine).
func (l *Layer) submitClose(id int64) {
	cmd := &fsm.Command{Type: fsm.CmdCloseSession, Session: id}
	l.rep.Submit(cmd, func(r replica.Result) {
		l.AuditServerWrite("", cmd, r.Res, r.Err)
		if r.Err != nil && l.tracker.Retry(id, l.clock.Now()) {
			// Without this the session, out of its bucket and marked
			// closing, would stay open (and its ephemerals with it)
			// until the next leader: seen with 50,000 expiring at once.
			l.log.Warn("closing an expired session failed; trying again", "session", sessionHex(id), "err", r.Err)
		}
		l.expiry.mu.Lock()
		l.expiry.inFlight--
		more := len(l.expiry.queue) > 0 && !l.expiry.pumping
		l.expiry.mu.Unlock()
		if more {
			// Not here: this runs inside apply, and a Submit that finds
			// leadership gone a moment ago forwards, which may wait.
			go l.pumpCloses()
		}
	})
}
