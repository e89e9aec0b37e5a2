package server

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"coord/api"
	"coord/vocab"
)

// rawSession is a bare session stream for server tests (the client package
// has its own tests): it sends requests and reads messages in order.
type rawSession struct {
	t       testing.TB
	cc      *grpc.ClientConn
	stream  api.Coord_SessionClient
	cancel  context.CancelFunc
	id      int64
	pw      []byte
	xid     int64
	lastZx  int64
	events  []*api.WatchEvent
	timeout int32
}

func dialSession(t testing.TB, addr string, req *api.ConnectRequest) (*rawSession, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := api.NewCoordClient(cc).Session(ctx)
	if err != nil {
		cancel()
		cc.Close()
		return nil, err
	}
	if req == nil {
		req = &api.ConnectRequest{TimeoutMs: 10000}
	}
	if err := stream.Send(&api.ClientMessage{Msg: &api.ClientMessage_Connect{Connect: req}}); err != nil {
		cancel()
		cc.Close()
		return nil, err
	}
	msg, err := stream.Recv()
	if err != nil {
		cancel()
		cc.Close()
		return nil, err
	}
	r := msg.GetConnected()
	rs := &rawSession{t: t, cc: cc, stream: stream, cancel: cancel, id: r.SessionId, pw: r.Password, lastZx: r.Zxid, timeout: r.TimeoutMs}
	t.Cleanup(rs.drop)
	return rs, nil
}

func newSession(t testing.TB, addr string) *rawSession {
	t.Helper()
	s, err := dialSession(t, addr, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", addr, err)
	}
	return s
}

// drop ends the stream without closing the session.
func (s *rawSession) drop() {
	s.cancel()
	s.cc.Close()
}

// send writes a request and returns its xid.
func (s *rawSession) send(req *api.Request) int64 {
	s.t.Helper()
	s.xid++
	req.Xid = s.xid
	if err := s.stream.Send(&api.ClientMessage{Msg: &api.ClientMessage_Request{Request: req}}); err != nil {
		s.t.Fatalf("send: %v", err)
	}
	return s.xid
}

// recv returns the response to xid, collecting events that come first.
func (s *rawSession) recv(xid int64) *api.Response {
	s.t.Helper()
	r, err := s.tryRecv(xid)
	if err != nil {
		s.t.Fatalf("recv: %v", err)
	}
	return r
}

// tryRecv is recv returning what went wrong instead of failing the test.
func (s *rawSession) tryRecv(xid int64) (*api.Response, error) {
	for {
		msg, err := s.recvMsg(recvTimeout)
		if err != nil {
			return nil, err
		}
		if ev := msg.GetEvent(); ev != nil {
			s.events = append(s.events, ev)
			continue
		}
		r := msg.GetResponse()
		if r.GetXid() != xid {
			return nil, fmt.Errorf("response xid %d, want %d", r.GetXid(), xid)
		}
		if r.Err == int32(vocab.ConnectionLoss) {
			return r, nil // the server gives no zxid with a connection loss
		}
		if r.Zxid < s.lastZx {
			return nil, fmt.Errorf("zxid went back from %x to %x", s.lastZx, r.Zxid)
		}
		s.lastZx = r.Zxid
		return r, nil
	}
}

// tryDo sends a request and returns its response, or the error that ended
// the stream, without failing the test (for goroutines other than the
// test's).
func (s *rawSession) tryDo(req *api.Request) (*api.Response, error) {
	s.xid++
	req.Xid = s.xid
	if err := s.stream.Send(&api.ClientMessage{Msg: &api.ClientMessage_Request{Request: req}}); err != nil {
		if err == io.EOF {
			// The server ended the stream: its status says why.
			for {
				if _, rerr := s.stream.Recv(); rerr != nil {
					return nil, rerr
				}
			}
		}
		return nil, err
	}
	return s.tryRecv(s.xid)
}

func (s *rawSession) do(req *api.Request) *api.Response {
	s.t.Helper()
	return s.recv(s.send(req))
}

func (s *rawSession) create(path string, data string, mode vocab.CreateMode) *api.Response {
	s.t.Helper()
	return s.do(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{Path: path, Data: []byte(data),
		Mode: int32(mode), Acl: []*api.ACL{{Perms: int32(vocab.PermAll), Id: &api.Id{Scheme: "world", Id: "anyone"}}}}}})
}

func (s *rawSession) get(path string, watch bool) *api.Response {
	s.t.Helper()
	return s.do(&api.Request{Op: &api.Request_GetData{GetData: &api.GetDataRequest{Path: path, Watch: watch}}})
}

func (s *rawSession) set(path, data string) *api.Response {
	s.t.Helper()
	return s.do(&api.Request{Op: &api.Request_SetData{SetData: &api.SetDataRequest{Path: path, Data: []byte(data), Version: -1}}})
}

func (s *rawSession) children(path string, watch bool) *api.Response {
	s.t.Helper()
	return s.do(&api.Request{Op: &api.Request_GetChildren{GetChildren: &api.GetChildrenRequest{Path: path, Watch: watch}}})
}

func (s *rawSession) sync() *api.Response {
	s.t.Helper()
	return s.do(&api.Request{Op: &api.Request_Sync{Sync: &api.SyncRequest{Path: "/"}}})
}

func (s *rawSession) ping() *api.Response {
	s.t.Helper()
	return s.do(&api.Request{Op: &api.Request_Ping{Ping: &api.Ping{}}})
}

// recvTimeout bounds a wait for the server's answer: a server that never
// answers fails the test with every goroutine's stack instead of hanging it.
const recvTimeout = 60 * time.Second

// recvMsg reads the next message from the stream, failing after timeout.
func (s *rawSession) recvMsg(timeout time.Duration) (*api.ServerMessage, error) {
	type res struct {
		msg *api.ServerMessage
		err error
	}
	ch := make(chan res, 1)
	go func() { m, err := s.stream.Recv(); ch <- res{m, err} }()
	select {
	case r := <-ch:
		return r.msg, r.err
	case <-time.After(timeout):
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		s.t.Logf("no message from the server within %v; goroutines:\n%s", timeout, buf)
		s.cancel()
		return nil, fmt.Errorf("no message within %v", timeout)
	}
}

// nextEvent waits for a watch event.
func (s *rawSession) nextEvent(timeout time.Duration) *api.WatchEvent {
	s.t.Helper()
	if len(s.events) > 0 {
		ev := s.events[0]
		s.events = s.events[1:]
		return ev
	}
	type res struct {
		msg *api.ServerMessage
		err error
	}
	ch := make(chan res, 1)
	go func() { m, err := s.stream.Recv(); ch <- res{m, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			s.t.Fatalf("waiting for an event: %v", r.err)
		}
		if ev := r.msg.GetEvent(); ev != nil {
			return ev
		}
		s.t.Fatalf("got %v while waiting for an event", r.msg)
	case <-time.After(timeout):
		s.t.Fatalf("no event within %v", timeout)
	}
	return nil
}

func mustOK(t testing.TB, r *api.Response) *api.Response {
	t.Helper()
	if r.Err != 0 {
		t.Fatalf("response error %v (%d) path %q", vocab.Code(r.Err), r.Err, r.ErrPath)
	}
	return r
}
