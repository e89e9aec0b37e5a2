package server

import (
	"fmt"
	"sync"

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
	return &conn{s: s, id: id, timeout: timeout, owner: owner, auth: auth, out: newOutbox(s.cfg.MaxOutstanding)}
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
type outbox struct {
	mu       sync.Mutex
	slots    []*slot
	ready    []*api.ServerMessage
	max      int
	wake     chan struct{} // a message is ready or the box closed
	room     chan struct{} // a slot was freed
	done     chan struct{} // closed by close
	err      error
	isClosed bool
}

type slot struct {
	msg *api.ServerMessage
}

func newOutbox(max int) *outbox {
	return &outbox{max: max, wake: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
}

func (o *outbox) signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// reserve takes the next response slot, waiting while the session has
// MaxOutstanding responses pending. It returns nil once the box is closed.
func (o *outbox) reserve() *slot {
	for {
		o.mu.Lock()
		if o.isClosed {
			o.mu.Unlock()
			return nil
		}
		if len(o.slots) < o.max {
			sl := &slot{}
			o.slots = append(o.slots, sl)
			o.mu.Unlock()
			return sl
		}
		o.mu.Unlock()
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
		n++
	}
	if n > 0 {
		clear(o.slots[:n])
		o.slots = o.slots[n:]
		o.signal(o.wake)
		o.signal(o.room)
	}
}

func (o *outbox) push(msg *api.ServerMessage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return
	}
	o.ready = append(o.ready, msg)
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

// closeErr is the error the box was closed with.
func (o *outbox) closeErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// next returns the messages ready to send; ok is false once the box is
// closed and everything queued before has been returned.
func (o *outbox) next() (msgs []*api.ServerMessage, ok bool) {
	for {
		o.mu.Lock()
		if len(o.ready) > 0 {
			msgs, o.ready = o.ready, nil
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
