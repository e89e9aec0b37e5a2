package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"coord/api"
	"coord/vocab"
)

// errStreamGone: the stream broke before the request was written, so it is
// safe to send it on the next one.
var errStreamGone = errors.New("coord: stream gone")

// errProtocol marks a server message the client cannot make sense of; the
// client drops the stream and re-attaches elsewhere.
var errProtocol = errors.New("coord: protocol violation")

// call is one request waiting for its response.
type call struct {
	xid    int64
	req    *api.Request
	onResp func(*api.Response) // runs on the receive goroutine before the caller wakes
	done   chan callResult     // room for one result

	// claim settles a race between the response and the caller giving up:
	// whoever moves it from 0 wins. The response (1) runs onResp and the
	// caller then waits for it; a caller that gave up (2) leaves no local
	// trace of the call, such as a watch nobody reads.
	claim atomic.Int32
}

const (
	claimResponse  = 1
	claimAbandoned = 2
)

type callResult struct {
	resp *api.Response
	err  error
}

// stream is one attachment of the session to one server: a gRPC Session
// stream whose requests are written in xid order by whoever holds sendLock,
// and whose responses come back in the same order.
type stream struct {
	c       *Conn
	server  string
	timeout time.Duration // negotiated session timeout
	cc      *grpc.ClientConn
	cs      api.Coord_SessionClient
	cancel  context.CancelFunc

	sendLock chan struct{} // a mutex callers can give up waiting for
	gone     chan struct{} // closed when the stream is failed
	lastSend atomic.Int64  // unix nanoseconds
	lastRecv atomic.Int64

	mu      sync.Mutex
	pending []*call // written, awaiting responses, in xid order
	broken  bool
}

func newStream(c *Conn, server string, cc *grpc.ClientConn, cs api.Coord_SessionClient, cancel context.CancelFunc, timeout time.Duration) *stream {
	s := &stream{
		c: c, server: server, timeout: timeout, cc: cc, cs: cs, cancel: cancel,
		sendLock: make(chan struct{}, 1),
		gone:     make(chan struct{}),
	}
	now := time.Now().UnixNano()
	s.lastSend.Store(now)
	s.lastRecv.Store(now)
	return s
}

// send writes cl's request. The xid is taken while holding the send lock,
// so xids go out in increasing order and responses can be matched FIFO.
// errStreamGone means nothing was written; any other error is the context's.
func (s *stream) send(ctx context.Context, cl *call) error {
	select {
	case s.sendLock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.gone:
		return errStreamGone
	}
	defer func() { <-s.sendLock }()
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.write(cl)
}

// write does the work of send; the caller holds sendLock.
func (s *stream) write(cl *call) error {
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return errStreamGone
	}
	cl.xid = s.c.xid.Add(1)
	cl.req.Xid = cl.xid
	s.pending = append(s.pending, cl)
	s.mu.Unlock()
	s.lastSend.Store(time.Now().UnixNano())
	if err := s.cs.Send(&api.ClientMessage{Msg: &api.ClientMessage_Request{Request: cl.req}}); err != nil {
		// The receive loop sees the stream end and fails every pending
		// call, this one included, with ConnectionLoss.
		s.c.log.Debug("coord: send failed", "server", s.server, "err", err)
		s.cancel()
	}
	return nil
}

// fail ends the stream: pending calls get err, waiting senders move on.
func (s *stream) fail(err error) {
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return
	}
	s.broken = true
	pending := s.pending
	s.pending = nil
	close(s.gone)
	s.mu.Unlock()
	s.cancel()
	for _, cl := range pending {
		cl.done <- callResult{err: err}
	}
	_ = s.cc.Close()
}

// serve receives until the stream ends and returns why: a gRPC status error,
// errProtocol, or vocab.SessionExpired for an Expired event.
func (s *stream) serve() error {
	go s.pinger()
	for {
		msg, err := s.cs.Recv()
		if err != nil {
			return err
		}
		now := time.Now().UnixNano()
		s.lastRecv.Store(now)
		s.c.lastHeard.Store(now)
		switch m := msg.GetMsg().(type) {
		case *api.ServerMessage_Response:
			if err := s.complete(m.Response); err != nil {
				return err
			}
		case *api.ServerMessage_Event:
			ev := m.Event
			if State(ev.GetState()) == StateExpired {
				return vocab.SessionExpired
			}
			s.c.watches.fire(Event{
				Type: vocab.EventType(ev.GetType()), State: StateConnected,
				Path: ev.GetPath(), Zxid: ev.GetZxid(),
			})
		default:
			return fmt.Errorf("%w: unexpected %T after connect", errProtocol, m)
		}
	}
}

// complete matches a response with the oldest pending call.
func (s *stream) complete(r *api.Response) error {
	s.mu.Lock()
	if len(s.pending) == 0 || s.pending[0].xid != r.GetXid() {
		want := int64(-1)
		if len(s.pending) > 0 {
			want = s.pending[0].xid
		}
		s.mu.Unlock()
		return fmt.Errorf("%w: response xid %d, expected %d", errProtocol, r.GetXid(), want)
	}
	cl := s.pending[0]
	s.pending[0] = nil
	s.pending = s.pending[1:]
	s.mu.Unlock()
	s.c.noteZxid(r.GetZxid())
	if cl.claim.CompareAndSwap(0, claimResponse) && cl.onResp != nil {
		cl.onResp(r)
	}
	cl.done <- callResult{resp: r}
	return nil
}

// pingInterval is how long the stream may stay idle before a ping: a little
// under a third of the session timeout, so that the server hears from the
// session at least that often.
func pingInterval(timeout time.Duration) time.Duration { return timeout * 3 / 10 }

// pinger sends a ping whenever the stream has been idle for pingInterval,
// and drops the stream when the server has been silent for two thirds of
// the session timeout (ZooKeeper's read timeout), as it must answer pings.
func (s *stream) pinger() {
	interval := pingInterval(s.timeout)
	readTimeout := s.timeout * 2 / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-s.gone:
			return
		case <-t.C:
		}
		now := time.Now()
		lastRecv := time.Unix(0, s.lastRecv.Load())
		if now.Sub(lastRecv) >= readTimeout {
			s.c.log.Warn("coord: server silent, dropping connection", "server", s.server, "silent", now.Sub(lastRecv))
			s.cancel()
			return
		}
		if now.Sub(time.Unix(0, s.lastSend.Load())) >= interval {
			select {
			case s.sendLock <- struct{}{}:
				_ = s.write(&call{req: &api.Request{Op: &api.Request_Ping{Ping: &api.Ping{}}}, done: make(chan callResult, 1)})
				<-s.sendLock
			default: // a request is being written right now
			}
		}
		untilPing := time.Until(time.Unix(0, s.lastSend.Load()).Add(interval))
		t.Reset(max(min(untilPing, time.Until(lastRecv.Add(readTimeout))), time.Millisecond))
	}
}
