package server

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"coord/api"
	"coord/fsm"
)

// ZooKeeper's KeeperState values carried in WatchEvent.State.
const (
	stateSyncConnected = 3
	stateExpired       = -112
	eventNone          = -1
)

// conn is a session connected to this server: its identities, its ordered
// outbound stream and the accounting that keeps its requests in order.
type conn struct {
	s       *Server
	id      int64
	timeout int32  // ms
	owner   string // this connection's name in the session table
	out     *outbox

	mu            sync.Mutex
	auth          []fsm.Id // replaced, never changed in place
	writes        int      // writes (and syncs) submitted but not completed
	drained       chan struct{}
	closingClient bool // the client asked to close the session
	failed        bool // a write's fate is unknown: refuse further writes
}

func newConn(s *Server, id int64, timeout int32, owner string, auth []fsm.Id) *conn {
	return &conn{s: s, id: id, timeout: timeout, owner: owner, auth: auth,
		out: newOutbox(s.cfg.MaxOutstanding, s.cfg.MaxQueuedBytes, s.metrics.throttle)}
}

func (c *conn) identities() []fsm.Id {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.auth
}

func (c *conn) addIdentity(id fsm.Id) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, have := range c.auth {
		if have == id {
			return
		}
	}
	c.auth = append(append([]fsm.Id(nil), c.auth...), id)
}

// beginWrite counts a write (or sync) that later reads must wait for.
func (c *conn) beginWrite() {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
}

func (c *conn) endWrite() {
	c.mu.Lock()
	c.writes--
	if c.writes == 0 && c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
	c.mu.Unlock()
}

// waitWrites blocks until every write this session sent before has been
// applied here, so a read sees the session's own writes.
func (c *conn) waitWrites() {
	c.mu.Lock()
	if c.writes == 0 {
		c.mu.Unlock()
		return
	}
	if c.drained == nil {
		c.drained = make(chan struct{})
	}
	ch := c.drained
	c.mu.Unlock()
	select {
	case <-ch:
	case <-c.out.done:
	}
}

// event queues a watch event; called inside apply, so it lands before any
// response that can show the change.
func (c *conn) event(ev *api.WatchEvent) {
	c.s.metrics.events.Inc()
	c.out.push(&api.ServerMessage{Msg: &api.ServerMessage_Event{Event: ev}})
}

// sessionClosed runs inside apply when the session's close commits. A
// close the client asked for is answered by its own response; otherwise the
// session expired, and the client is told so before the stream ends.
func (c *conn) sessionClosed() {
	c.mu.Lock()
	byClient := c.closingClient
	c.mu.Unlock()
	if byClient {
		return
	}
	c.event(&api.WatchEvent{Type: eventNone, State: stateExpired})
	c.shut(fmt.Errorf("session 0x%x expired", c.id))
}

// shut ends the connection (not the session): the outbound stream sends
// what is queued and stops, and the session's watches here are dropped; the
// client re-registers them wherever it re-attaches.
func (c *conn) shut(err error) {
	c.s.mu.Lock()
	current := c.s.conns[c.id] == c
	if current {
		delete(c.s.conns, c.id)
		// Watches are keyed by session: drop them only if no newer
		// connection of the session has taken over here.
		c.s.watches.RemoveSession(c.id)
	}
	c.s.mu.Unlock()
	c.out.close(err)
}

// outbox is a session's ordered outbound stream. Responses take a slot in
// request order when the request arrives and are sent once every earlier
// slot is filled; events go straight to the queue of messages to send.
//
// It is also the connection's back-pressure: a request takes a slot only
// while the connection holds fewer than max messages (requests in flight,
// replies and events not yet written to the client) and fewer than
// maxBytes of unsent replies and events. Past either bound reserve waits,
// and since the front end reserves before it reads the next request, the
// server stops reading from that connection (as ZooKeeper does) until the
// client drains its replies; other sessions are not affected. Events never
// wait: apply must not wait for a client.
type outbox struct {
	mu         sync.Mutex
	slots      []*slot
	ready      []*api.ServerMessage
	readyBytes int
	inHand     int // messages the writer took with next and has not written yet
	inBytes    int // their bytes
	max        int
	maxBytes   int
	onThrottle func(start bool) // a reserve starts or stops waiting for room
	wake       chan struct{}    // a message is ready or the box closed
	room       chan struct{}    // room was freed
	done       chan struct{}    // closed by close
	err        error
	isClosed   bool
}

type slot struct {
	msg *api.ServerMessage
}

func newOutbox(max, maxBytes int, onThrottle func(bool)) *outbox {
	return &outbox{max: max, maxBytes: maxBytes, onThrottle: onThrottle,
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
}

func (o *outbox) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// full reports whether a new request must wait; o.mu is held.
func (o *outbox) full() bool {
	queued := len(o.slots) + len(o.ready) + o.inHand
	return queued > 0 && (queued >= o.max || o.readyBytes+o.inBytes >= o.maxBytes)
}

// reserve takes the next response slot, waiting while the connection is
// full (see outbox). It returns nil once the box is closed.
func (o *outbox) reserve() *slot {
	throttled := false
	defer func() {
		if throttled && o.onThrottle != nil {
			o.onThrottle(false)
		}
	}()
	for {
		o.mu.Lock()
		if o.isClosed {
			o.mu.Unlock()
			return nil
		}
		if !o.full() {
			sl := &slot{}
			o.slots = append(o.slots, sl)
			o.mu.Unlock()
			return sl
		}
		o.mu.Unlock()
		if !throttled && o.onThrottle != nil {
			throttled = true
			o.onThrottle(true)
		}
		select {
		case <-o.room:
		case <-o.done:
		}
	}
}

// fill completes a slot and releases the filled prefix of the slots.
func (o *outbox) fill(sl *slot, msg *api.ServerMessage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	sl.msg = msg
	n := 0
	for n < len(o.slots) && o.slots[n].msg != nil {
		o.ready = append(o.ready, o.slots[n].msg)
		o.readyBytes += proto.Size(o.slots[n].msg)
		n++
	}
	if n > 0 {
		clear(o.slots[:n])
		o.slots = o.slots[n:]
		o.signal(o.wake)
	}
}

func (o *outbox) push(msg *api.ServerMessage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return
	}
	o.ready = append(o.ready, msg)
	o.readyBytes += proto.Size(msg)
	o.signal(o.wake)
}

func (o *outbox) close(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return
	}
	o.isClosed, o.err = true, err
	close(o.done)
	o.signal(o.wake)
}

// written tells the box that the writer has written the messages of its
// last next to the client, which makes room for more requests (there is
// one writer, and it calls next again only after written).
func (o *outbox) written() {
	o.mu.Lock()
	o.inHand, o.inBytes = 0, 0
	o.mu.Unlock()
	o.signal(o.room)
}

// closeErr is the error the box was closed with.
func (o *outbox) closeErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// next returns the messages ready to send; ok is false once the box is
// closed and everything queued before has been returned. The writer calls
// written once it has written them.
func (o *outbox) next() (msgs []*api.ServerMessage, ok bool) {
	for {
		o.mu.Lock()
		if len(o.ready) > 0 {
			msgs, o.ready = o.ready, nil
			o.inHand, o.inBytes = len(msgs), o.readyBytes
			o.readyBytes = 0
			o.mu.Unlock()
			return msgs, true
		}
		if o.isClosed {
			o.mu.Unlock()
			return nil, false
		}
		o.mu.Unlock()
		<-o.wake
	}
}
