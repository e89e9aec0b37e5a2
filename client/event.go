package client

import (
	"fmt"
	"sync"

	"coord/vocab"
)

// State is the state of a session as the client sees it. The values are
// ZooKeeper's KeeperState numbers where ZooKeeper has one; Connecting is
// go-zookeeper's.
type State int32

const (
	// StateDisconnected: the stream to the server broke; the client is about
	// to look for another server. The session may still be alive.
	StateDisconnected State = 0
	// StateConnecting: the client is dialling a server and negotiating.
	StateConnecting State = 1
	// StateConnected: the session is attached to a server (ZooKeeper's
	// SyncConnected).
	StateConnected State = 3
	// StateAuthFailed: a server refused the session's password or identity.
	// The Conn is finished.
	StateAuthFailed State = 4
	// StateClosed: Close ended the session. The Conn is finished.
	StateClosed State = 7
	// StateExpired: the session is gone, by the server's word or because no
	// server could be reached within the session timeout. The Conn is
	// finished; its ephemerals are (or will shortly be) deleted.
	StateExpired State = -112
)

func (s State) String() string {
	switch s {
	case StateDisconnected:
		return "Disconnected"
	case StateConnecting:
		return "Connecting"
	case StateConnected:
		return "Connected"
	case StateAuthFailed:
		return "AuthFailed"
	case StateClosed:
		return "Closed"
	case StateExpired:
		return "Expired"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// terminal reports whether a Conn in state s can do nothing more.
func (s State) terminal() bool {
	return s == StateExpired || s == StateAuthFailed || s == StateClosed
}

// Event types beyond the znode ones of vocab.EventType (which keep ZooKeeper's
// numbers 1 to 4).
const (
	// EventSession is a change of session state (ZooKeeper's EventType None).
	EventSession = vocab.EventNone
	// EventNotWatching is the last event of a watch that will not fire: it
	// was removed, or the session ended. Err says why.
	EventNotWatching vocab.EventType = -2
)

// Event is a watch notification or a session state change.
//
// On the channel Connect returns, every event has Type EventSession. On a
// one-shot watch channel (GetW, ExistsW, ChildrenW) exactly one event
// arrives and the channel is closed: a znode event, or EventNotWatching when
// the session ends or the watch is removed. A persistent watch channel
// (AddWatch) carries znode events, EventSession events for disconnects and
// reconnects (changes made while disconnected are not replayed for
// persistent watches, so a consumer should re-read on StateConnected), and
// finally EventNotWatching before it closes.
type Event struct {
	Type   vocab.EventType
	State  State
	Path   string // the znode that changed; empty for session events
	Zxid   int64  // the change's zxid; -1 when the server synthesized the event on re-attach
	Err    error  // set on EventNotWatching, terminal session events and Disconnected (why the stream ended)
	Server string // the server the session is attached to, on session events
}

func (e Event) String() string {
	typ := e.Type.String()
	switch e.Type {
	case EventSession:
		typ = "Session"
	case EventNotWatching:
		typ = "NotWatching"
	}
	s := fmt.Sprintf("%s state=%s", typ, e.State)
	if e.Path != "" {
		s += " path=" + e.Path
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	return s
}

// sessionEvents is the channel of session state changes. It never blocks
// the Conn and needs no reader: when a reader falls sessionEventsCap events
// behind, the oldest are dropped, so the newest (and the final) state is
// always there to read.
type sessionEvents struct {
	mu     sync.Mutex
	ch     chan Event
	closed bool
}

const sessionEventsCap = 64

func newSessionEvents() *sessionEvents {
	return &sessionEvents{ch: make(chan Event, sessionEventsCap)}
}

func (e *sessionEvents) push(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	for {
		select {
		case e.ch <- ev:
			return
		default:
			select {
			case <-e.ch: // drop the oldest
			default:
			}
		}
	}
}

func (e *sessionEvents) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.ch)
	}
}

// queue is an unbounded FIFO of events feeding a channel, so that the
// receive loop never blocks on a slow reader. Its goroutine ends once the
// queue is closed and every event has been read.
type queue struct {
	mu     sync.Mutex
	items  []Event
	closed bool
	wake   chan struct{}
	stop   chan struct{} // closed by discard
	out    chan Event
}

func newQueue() *queue {
	q := &queue{wake: make(chan struct{}, 1), stop: make(chan struct{}), out: make(chan Event)}
	go q.run()
	return q
}

// push appends e; it is dropped if the queue is closed.
func (q *queue) push(e Event) {
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, e)
	}
	q.mu.Unlock()
	q.signal()
}

// close lets the channel close after the queued events are read.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// discard closes the queue and drops what nobody will read.
func (q *queue) discard() {
	q.close()
	close(q.stop)
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) run() {
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			closed := q.closed
			q.mu.Unlock()
			if closed {
				close(q.out)
				return
			}
			<-q.wake
			continue
		}
		e := q.items[0]
		q.items[0] = Event{}
		q.items = q.items[1:]
		q.mu.Unlock()
		select {
		case q.out <- e:
		case <-q.stop:
			close(q.out)
			return
		}
	}
}
