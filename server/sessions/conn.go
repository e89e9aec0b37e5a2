package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"coord/fsm"
	"coord/server/replica"
	"coord/session"
	"coord/vocab"
	"coord/watch"
	"coord/zxid"
)

// Conn is a session connected to this server: its identities, its ordered
// outbound stream and the accounting that keeps its requests in order.
type Conn struct {
	l       *Layer
	id      int64
	timeout int32  // ms
	owner   string // this connection's name in the session table
	out     *outbox
	// touched: the client was heard from since this follower's last
	// report to the leader (Touch, ReportTouches).
	touched atomic.Bool

	mu            sync.Mutex
	auth          []vocab.Id // replaced, never changed in place
	writes        int        // writes (and syncs) submitted but not completed
	drained       chan struct{}
	closingClient bool // the client asked to close the session
	failed        bool // a write's fate is unknown: refuse further writes
	saslState     *saslDigest
	// readOnly: a session connected in read-only mode, which may only read
	// (readonly.go); local: its id is a local session's, not in the log.
	readOnly, local bool
	// watchLimitLogged: a refusal by MaxWatchesPerSession was logged at
	// warning level (later ones at debug level).
	watchLimitLogged bool
}

func newConn(l *Layer, id int64, timeout int32, owner string, auth []vocab.Id) *Conn {
	c := &Conn{l: l, id: id, timeout: timeout, owner: owner, auth: auth,
		out: newOutbox(l.cfg.MaxOutstanding, l.cfg.MaxQueuedBytes, l.cfg.Metrics.Throttled)}
	c.out.stages = l.cfg.Metrics
	return c
}

// connect is Connect.
func (l *Layer) connect(ctx context.Context, req *ConnectRequest, ip string) (*Conn, *ConnectReply, error) {
	auth := []vocab.Id{}
	if ip != "" {
		auth = append(auth, vocab.Id{Scheme: "ip", ID: ip})
	}
	for _, id := range req.Auth {
		if id.Scheme == "digest" {
			auth = append(auth, l.digestIdentities(id)...)
		} else {
			auth = append(auth, id)
		}
	}
	// A server cut off from its leader takes no session (the server's WaitServing):
	// wait a little for contact, then send the client elsewhere; in
	// read-only mode a client that accepts it gets a read-only session.
	if req.ReadOnly && l.readOnlyMode() {
		return l.connectReadOnly(req, auth)
	}
	sctx, scancel := context.WithTimeout(ctx, l.rep.LeaderWait())
	err := l.cfg.WaitServing(sctx)
	scancel()
	if err != nil {
		if req.ReadOnly && l.readOnlyMode() {
			return l.connectReadOnly(req, auth)
		}
		return nil, nil, refuse(ErrUnavailable, "%v", err)
	}
	// Never answer from a state older than what the client has seen: wait
	// a little for this server to catch up, then send the client elsewhere.
	if last := zxid.Zxid(req.LastZxid); last > l.rep.LastZxid() {
		wctx, cancel := context.WithTimeout(ctx, l.rep.LeaderWait())
		for last > l.rep.LastZxid() && wctx.Err() == nil {
			select {
			case <-l.rep.AppliedChanged():
			case <-wctx.Done():
			}
		}
		cancel()
		if last > l.rep.LastZxid() {
			return nil, nil, refuse(ErrBehind,
				"client has seen zxid %v, this server only %v", last, l.rep.LastZxid())
		}
	}
	var (
		id      int64
		timeout int32
		pw      []byte
	)
	owner := fmt.Sprintf("%s/%d", l.rep.Origin(), l.connSeq.Add(1))
	if req.SessionID == 0 {
		timeout = l.cfg.Bounds.Negotiate(req.TimeoutMs)
		cctx, cancel := context.WithTimeout(ctx, 2*l.rep.LeaderWait())
		ar, err := l.rep.Propose(cctx, &fsm.Command{Type: fsm.CmdCreateSession, Timeout: timeout, Owner: owner})
		cancel()
		if err == nil {
			err = ar.Res.Err
		}
		if err != nil {
			return nil, nil, refuse(ErrUnavailable, "creating session: %v", err)
		}
		id = ar.Res.SessionID
		info, _ := l.rep.View().Session(id)
		pw = info.Password
	} else {
		id = req.SessionID
		info, ok := l.rep.View().Session(id)
		if !ok {
			// Only what the leader has committed says a session is gone:
			// this server may be behind it (a server restarted with kill
			// -9 replays its log once it hears from the leader), and a
			// client that has had no response yet has no zxid to hold it
			// to. Catch up first.
			if err := l.catchUp(ctx); err != nil {
				return nil, nil, refuse(ErrUnavailable, "catching up before looking up session 0x%x: %v", id, err)
			}
			if info, ok = l.rep.View().Session(id); !ok {
				return nil, nil, refuse(ErrSessionExpired, "session 0x%x expired", id)
			}
		}
		if !session.CheckPassword(info.Password, req.Password) {
			return nil, nil, refuse(ErrWrongPassword, "wrong password for session 0x%x", id)
		}
		timeout, pw = info.Timeout, info.Password
		// The session now belongs to this connection: once that is in the
		// log, anything still in flight on its old connection, here or on
		// another server, fails with SessionMoved.
		cctx, cancel := context.WithTimeout(ctx, 2*l.rep.LeaderWait())
		ar, err := l.rep.Propose(cctx, &fsm.Command{Type: fsm.CmdAttachSession, Session: id, Owner: owner})
		cancel()
		if err == nil && ar.Res.Err != nil {
			return nil, nil, refuse(ErrSessionExpired, "session 0x%x expired", id)
		}
		if err != nil {
			return nil, nil, refuse(ErrUnavailable, "re-attaching session: %v", err)
		}
	}
	c := newConn(l, id, timeout, owner, auth)
	l.mu.Lock()
	old := l.conns[id]
	if old != nil {
		// The session moves to this new connection; its old watches here
		// go, the client re-registers them.
		delete(l.conns, id)
		l.watches.RemoveSession(id)
	}
	l.conns[id] = c
	l.mu.Unlock()
	if old != nil {
		old.Shut(nil)
	}
	c.Touch()
	if req.Watches != nil {
		l.reattachWatches(c, req.Watches)
	}
	return c, &ConnectReply{SessionID: id, Password: pw, TimeoutMs: timeout,
		Zxid: int64(l.rep.LastZxid()), ServerID: l.cfg.ServerID}, nil
}

// reattachWatches re-registers a re-attaching client's watches, firing at
// once those whose node changed after the zxid the client last saw.
func (l *Layer) reattachWatches(c *Conn, w *WatchSet) {
	l.rep.Read(func(v *fsm.View) { l.reattachLocked(c, v, w) })
}

// reattachLocked does reattachWatches with the apply lock held shared.
// It returns Reattach's error: some watches were not registered.
func (l *Layer) reattachLocked(c *Conn, v *fsm.View, w *WatchSet) error {
	events, err := l.watches.Reattach(v, c.id, w.RelativeZxid, w.Watches)
	var refused *watch.LimitError
	switch {
	case errors.As(err, &refused):
		c.watchRefused("setWatches", "", refused.Refused, refused.Of)
	case err != nil:
		l.log.Warn("re-registering watches", "session", sessionHex(c.id), "err", err)
	}
	for _, ev := range events {
		c.event(watchEvent(ev))
	}
	return err
}

func (c *Conn) identities() []vocab.Id {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.auth
}

func (c *Conn) addIdentity(id vocab.Id) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, have := range c.auth {
		if have == id {
			return
		}
	}
	c.auth = append(append([]vocab.Id(nil), c.auth...), id)
}

// beginWrite counts a write (or sync) that later reads must wait for.
func (c *Conn) beginWrite() {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
}

func (c *Conn) endWrite() {
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
func (c *Conn) waitWrites() {
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
func (c *Conn) event(ev *Event) {
	c.l.cfg.Metrics.Event()
	c.out.push(ev)
}

// sessionClosed runs inside apply when the session's close commits. A
// close the client asked for is answered by its own response; otherwise the
// session expired, and the client is told so before the stream ends.
func (c *Conn) sessionClosed() {
	c.mu.Lock()
	byClient := c.closingClient
	c.mu.Unlock()
	if byClient {
		return
	}
	c.event(&Event{Type: vocab.EventNone, State: vocab.StateExpired})
	c.Shut(fmt.Errorf("session 0x%x expired", c.id))
}

// Touch records that the client was heard from (every request and ping).
// On the leader it extends the session's deadline at once; on a follower
// it only marks the connection, without a lock, for the next report to
// the leader (ReportTouches): the leader keeps the deadlines, and a new
// leader gives every session a full timeout anyway (TakeOver).
func (c *Conn) Touch() {
	if c.l.rep.IsLeader() {
		c.l.tracker.TouchStored(c.id)
		return
	}
	c.touched.Store(true)
}

// Shut ends the connection (not the session): the outbound stream sends
// what is queued and stops, and the session's watches here are dropped; the
// client re-registers them wherever it re-attaches.
func (c *Conn) Shut(err error) {
	c.l.mu.Lock()
	current := c.l.conns[c.id] == c
	if current {
		delete(c.l.conns, c.id)
		// Watches are keyed by session: drop them only if no newer
		// connection of the session has taken over here.
		c.l.watches.RemoveSession(c.id)
	}
	c.l.mu.Unlock()
	if c.touched.Swap(false) {
		// The client's last requests still count: the next report
		// carries them.
		c.l.touchMu.Lock()
		c.l.touched[c.id] = struct{}{}
		c.l.touchMu.Unlock()
	}
	if c.local {
		c.l.connEnded(c)
	}
	c.out.close(err)
}

// outbox is a session's ordered outbound stream. Replies take a slot in
// request order when the request arrives and are sent once every earlier
// slot is filled; events go straight to the queue of messages to send.
//
// It is also the connection's back-pressure: a request takes a slot only
// while the connection holds fewer than max messages (requests in flight,
// replies and events not yet written to the client) and fewer than
// maxBytes of unsent replies and events (as message.size estimates them,
// without encoding). Past either bound reserve waits,
// and since the front end reserves before it reads the next request, the
// server stops reading from that connection (as ZooKeeper does) until the
// client drains its replies; other sessions are not affected. Events never
// wait: apply must not wait for a client.
type outbox struct {
	mu         sync.Mutex
	slots      []*slot
	ready      []Message
	readyBytes int
	inHand     int // messages the writer took with next and has not written yet
	inBytes    int // their bytes
	max        int
	maxBytes   int
	onThrottle func(start bool)      // a reserve starts or stops waiting for room
	hand       []Message             // what the writer took with next
	stages     replica.StageObserver // told when a write's reply is written (nil: no one)
	wake       chan struct{}         // a message is ready or the box closed
	parked     func()                // a parked writer's restart (nextOrPark), run once a message is ready or the box closes
	room       chan struct{}         // room was freed
	done       chan struct{}         // closed by close
	err        error
	isClosed   bool
}

type slot struct {
	r *Reply
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

// wakeWriter tells the writer that a message is ready or the box closed:
// a waiting one through wake, a parked one by starting it again. o.mu is
// held.
func (o *outbox) wakeWriter() {
	o.signal(o.wake)
	if start := o.parked; start != nil {
		o.parked = nil
		go start()
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
func (o *outbox) fill(sl *slot, r *Reply) {
	o.mu.Lock()
	defer o.mu.Unlock()
	sl.r = r
	n := 0
	for n < len(o.slots) && o.slots[n].r != nil {
		o.ready = append(o.ready, o.slots[n].r)
		o.readyBytes += o.slots[n].r.size()
		n++
	}
	if n > 0 {
		clear(o.slots[:n])
		o.slots = o.slots[n:]
		o.wakeWriter()
	}
}

func (o *outbox) push(msg Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return
	}
	o.ready = append(o.ready, msg)
	o.readyBytes += msg.size()
	o.wakeWriter()
}

func (o *outbox) close(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return
	}
	o.isClosed, o.err = true, err
	close(o.done)
	o.wakeWriter()
}

// written tells the box that the writer has written the messages of its
// last next to the client, which makes room for more requests (there is
// one writer, and it calls next again only after written).
func (o *outbox) written() {
	o.mu.Lock()
	o.inHand, o.inBytes = 0, 0
	hand := o.hand
	o.hand = nil
	o.mu.Unlock()
	o.signal(o.room)
	if o.stages != nil {
		var now time.Time
		for _, m := range hand {
			if r, ok := m.(*Reply); ok && !r.applied.IsZero() {
				if now.IsZero() {
					now = time.Now()
				}
				o.stages.ObserveStage(replica.StageReply, now.Sub(r.applied))
				o.stages.ObserveStage(replica.StageTotal, now.Sub(r.start))
			}
		}
	}
}

// closeErr is the error the box was closed with.
func (o *outbox) closeErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// takeLocked hands the ready messages to the writer; o.mu is held.
func (o *outbox) takeLocked() []Message {
	msgs := o.ready
	o.ready = nil
	o.hand = msgs
	o.inHand, o.inBytes = len(msgs), o.readyBytes
	o.readyBytes = 0
	return msgs
}

// next returns the messages ready to send; ok is false once the box is
// closed and everything queued before has been returned. The writer calls
// written once it has written them.
func (o *outbox) next() (msgs []Message, ok bool) {
	for {
		o.mu.Lock()
		if len(o.ready) > 0 {
			msgs = o.takeLocked()
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

// nextOrPark is next without the wait: with nothing ready and the box
// open it records start, to be run in a new goroutine once a message is
// ready or the box closes, and reports parked.
func (o *outbox) nextOrPark(start func()) (msgs []Message, ok, parked bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.ready) > 0 {
		return o.takeLocked(), true, false
	}
	if o.isClosed {
		return nil, false, false
	}
	o.parked = start
	return nil, true, true
}

// ID is the session's id.
func (c *Conn) ID() int64 { return c.id }

// Timeout is the session's negotiated timeout.
func (c *Conn) Timeout() time.Duration { return time.Duration(c.timeout) * time.Millisecond }

// Outstanding is how many of the session's requests are taken and not yet
// answered (ZooKeeper's outstanding requests of a connection).
func (c *Conn) Outstanding() int {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	n := 0
	for _, sl := range c.out.slots {
		if sl.r == nil {
			n++
		}
	}
	return n
}

// Next returns the messages ready to send to the client (replies and
// events, in order), waiting for one; ok is false once the connection is
// shut and everything queued before has been returned. The front end's
// writer calls Written once it has written them.
func (c *Conn) Next() (msgs []Message, ok bool) { return c.out.next() }

// NextOrPark is Next for a writer that does not wait: when nothing is
// ready it returns parked, and start runs in a new goroutine once
// something is (or the connection is shut). An idle connection then has
// no writer goroutine (a server may hold 100,000 of them). A writer uses
// Next or NextOrPark, not both.
func (c *Conn) NextOrPark(start func()) (msgs []Message, ok, parked bool) {
	return c.out.nextOrPark(start)
}

// Written tells the connection that the messages of the last Next reached
// the client, which makes room for more requests.
func (c *Conn) Written() { c.out.written() }

// CloseErr is the error the connection was shut with (nil for a plain
// close).
func (c *Conn) CloseErr() error { return c.out.closeErr() }

// catchUp waits until this server has applied everything the leader had
// committed when it was called (as sync does), within twice the leader
// wait. Asking the leader is tried again until then: a server whose
// partition just healed has its raft back before its connection to the
// leader's gRPC port.
func (l *Layer) catchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*l.rep.LeaderWait())
	defer cancel()
	for {
		idx, err := l.rep.SyncIndex(ctx)
		if err == nil {
			return l.rep.WaitApplied(ctx, idx)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
