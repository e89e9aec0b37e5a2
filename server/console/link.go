package console

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"coord/server/sessions"
	"coord/vocab"
)

// link is a sign-in's session on the session layer, driven as a front end
// drives one: requests in through Conn.Handle (one at a time, in order),
// replies and events out through the session's outbox, read by pump.
type link struct {
	id    int64
	c     *sessions.Conn
	ids   []vocab.Id // the session's identities, as whoAmI reports them
	touch func()     // a heartbeat of the session

	handle sync.Mutex // Handle is called by one goroutine at a time

	mu      sync.Mutex
	xid     int64
	waiting map[int64]chan *sessions.Reply
	done    chan struct{}
	err     error
}

// openLink opens a session; onEvent gets its watch events, and an event
// with Session "lost" if the session ends under it.
func openLink(ctx context.Context, srv Server, req *sessions.ConnectRequest, ip string, onEvent func(event)) (*link, error) {
	c, resp, err := srv.Connect(ctx, req, ip)
	if err != nil {
		return nil, errorf(http.StatusServiceUnavailable, "Unavailable", "this server cannot open a session now: "+err.Error())
	}
	l := &link{id: resp.SessionID, c: c, touch: func() { srv.Touch(resp.SessionID) }, waiting: map[int64]chan *sessions.Reply{}, done: make(chan struct{})}
	go l.pump(onEvent)
	go l.heartbeat(time.Duration(resp.TimeoutMs) * time.Millisecond / 3)
	return l, nil
}

// heartbeat keeps the session alive while the link lives, as a client's
// pings do, at a third of the timeout the server negotiated (which may be
// far below the one asked for: 20 ticks at most).
func (l *link) heartbeat(every time.Duration) {
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			l.touch()
		}
	}
}

func (l *link) pump(onEvent func(event)) {
	defer func() {
		l.mu.Lock()
		l.err = l.c.CloseErr()
		for xid, ch := range l.waiting {
			close(ch)
			delete(l.waiting, xid)
		}
		close(l.done)
		l.mu.Unlock()
		onEvent(event{Session: "lost"})
	}()
	for {
		msgs, ok := l.c.Next()
		if !ok {
			return
		}
		for _, m := range msgs {
			switch m := m.(type) {
			case *sessions.Reply:
				l.mu.Lock()
				ch := l.waiting[m.Xid]
				delete(l.waiting, m.Xid)
				l.mu.Unlock()
				if ch != nil {
					ch <- m
				}
			case *sessions.Event:
				if ev, ok := watchEventJSON(m); ok {
					onEvent(ev)
				} else if m.State == vocab.StateExpired {
					onEvent(event{Session: "lost"})
				}
			}
		}
		l.c.Written()
	}
}

func watchEventJSON(m *sessions.Event) (event, bool) {
	t := ""
	switch m.Type {
	case vocab.EventNodeCreated:
		t = "created"
	case vocab.EventNodeDeleted:
		t = "deleted"
	case vocab.EventNodeDataChanged:
		t = "changed"
	case vocab.EventNodeChildrenChanged:
		t = "children"
	default:
		return event{}, false
	}
	return event{Type: t, Path: m.Path, Zxid: hexID(m.Zxid)}, true
}

func (l *link) isDone() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// send hands req to the session and returns where its reply will come.
func (l *link) send(req *sessions.Request) (<-chan *sessions.Reply, error) {
	ch := make(chan *sessions.Reply, 1)
	l.mu.Lock()
	if l.isDone() {
		l.mu.Unlock()
		return nil, l.lost()
	}
	l.xid++
	req.Xid = l.xid
	l.waiting[req.Xid] = ch
	l.mu.Unlock()
	l.touch()
	l.c.Handle(req)
	return ch, nil
}

func (l *link) lost() error {
	msg := "the console's session on this server ended"
	if l.err != nil {
		msg += ": " + l.err.Error()
	}
	return errorf(http.StatusServiceUnavailable, "ConnectionLoss", msg+"; retry")
}

// wait is the reply that ch brings.
func (l *link) wait(ctx context.Context, ch <-chan *sessions.Reply) (*sessions.Reply, error) {
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, l.lost()
		}
		return r, nil
	case <-ctx.Done():
		return nil, errorf(http.StatusServiceUnavailable, "OperationTimeout", "no answer from the session: "+ctx.Err().Error())
	}
}

// call runs one request and waits for its reply.
func (l *link) call(ctx context.Context, req *sessions.Request) (*sessions.Reply, error) {
	l.handle.Lock()
	ch, err := l.send(req)
	l.handle.Unlock()
	if err != nil {
		return nil, err
	}
	return l.wait(ctx, ch)
}

// calls runs requests in order, all handed to the session before the
// first reply is awaited, and returns their replies in order.
func (l *link) calls(ctx context.Context, reqs []*sessions.Request) ([]*sessions.Reply, error) {
	chs := make([]<-chan *sessions.Reply, 0, len(reqs))
	l.handle.Lock()
	for _, req := range reqs {
		ch, err := l.send(req)
		if err != nil {
			l.handle.Unlock()
			return nil, err
		}
		chs = append(chs, ch)
	}
	l.handle.Unlock()
	out := make([]*sessions.Reply, len(reqs))
	for i, ch := range chs {
		r, err := l.wait(ctx, ch)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// whoAmI is the session's identities.
func (l *link) whoAmI(ctx context.Context) ([]vocab.Id, error) {
	r, err := l.call(ctx, &sessions.Request{Kind: sessions.OpWhoAmI})
	if err != nil {
		return nil, err
	}
	if r.Err != vocab.OK {
		return nil, codeError(r.Err, "")
	}
	ids := make([]vocab.Id, 0, len(r.Clients))
	for _, ci := range r.Clients {
		ids = append(ids, vocab.Id{Scheme: ci.Scheme, ID: ci.User})
	}
	return ids, nil
}

// close stops the pump; with closeSession it first ends the session
// (closeSession through the log: its ephemerals go at once), else the
// session expires as a client's does when its server stops.
func (l *link) close(closeSession bool) {
	if l.isDone() {
		return
	}
	if closeSession {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// An error leaves the session to its expiry.
		l.call(ctx, &sessions.Request{Kind: sessions.OpClose})
		cancel()
	}
	l.c.Shut(nil)
}

func hexID(id int64) string { return fmt.Sprintf("0x%x", uint64(id)) }
