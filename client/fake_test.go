package client

// An in-process fake of the Coord service, spoken over real gRPC on a
// loopback listener. Several fakeServers can share one fakeCluster (the tree
// and the sessions), so a client can fail over between them. The fake keeps
// the protocol's rules the client relies on: responses in request order,
// events queued before the response that shows the change, watches dropped
// when a stream ends and re-registered from ConnectRequest.watches.

import (
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/vocab"
)

type fakeNode struct {
	data []byte
	null bool
	stat vocab.Stat
	acl  []*api.ACL
}

type fakeSession struct {
	id       int64
	password []byte
	out      *fakeStream // the attached stream, or nil
	watches  map[watchKey]bool
}

type fakeCluster struct {
	mu        sync.Mutex
	zxid      int64
	nodes     map[string]*fakeNode
	sessions  map[int64]*fakeSession
	timeoutMs int32 // negotiated timeout; 0 grants what the client asks
	collect   *[]fakeTrigger
}

// fakeTrigger is a change whose events wait for a multi to succeed.
type fakeTrigger struct {
	path string
	typ  vocab.EventType
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		nodes:    map[string]*fakeNode{"/": {stat: vocab.Stat{}}},
		sessions: map[int64]*fakeSession{},
	}
}

// outItem is one message for a stream's sender; end closes the stream with
// the given status after the message (or right away if msg is nil).
type outItem struct {
	msg *api.ServerMessage
	end bool
	err error
}

type fakeStream struct {
	srv  *fakeServer
	sess *fakeSession
	out  chan outItem
}

func (s *fakeStream) send(m *api.ServerMessage) { s.out <- outItem{msg: m} }

// end closes the stream with err (nil: a clean end) once everything queued
// before it is sent.
func (s *fakeStream) end(err error) { s.out <- outItem{end: true, err: err} }

type fakeServer struct {
	api.UnimplementedCoordServer
	cl   *fakeCluster
	addr string
	gs   *grpc.Server

	mu       sync.Mutex
	connects []*api.ConnectRequest
	requests []*api.Request
	reqTimes []time.Time
	streams  []*fakeStream
	reject   func(*api.ConnectRequest) error      // refuses a connect with its error
	hook     func(*fakeStream, *api.Request) bool // true: handled, skip the default
	held     []*api.ServerMessage                 // responses held back by hold
	holding  bool
}

func newFakeServer(t testing.TB, cl *fakeCluster) *fakeServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{cl: cl, addr: lis.Addr().String(), gs: grpc.NewServer()}
	api.RegisterCoordServer(f.gs, f)
	go func() { _ = f.gs.Serve(lis) }()
	t.Cleanup(f.stop)
	return f
}

// stop kills the server: every stream breaks and new connects are refused.
func (f *fakeServer) stop() { f.gs.Stop() }

func (f *fakeServer) setReject(fn func(*api.ConnectRequest) error) {
	f.mu.Lock()
	f.reject = fn
	f.mu.Unlock()
}

func (f *fakeServer) setHook(fn func(*fakeStream, *api.Request) bool) {
	f.mu.Lock()
	f.hook = fn
	f.mu.Unlock()
}

// hold keeps responses back (events still flow) until release.
func (f *fakeServer) hold() {
	f.mu.Lock()
	f.holding = true
	f.mu.Unlock()
}

func (f *fakeServer) release(s *fakeStream) {
	f.mu.Lock()
	held := f.held
	f.held, f.holding = nil, false
	f.mu.Unlock()
	for _, m := range held {
		s.send(m)
	}
}

func (f *fakeServer) lastConnect() *api.ConnectRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.connects) == 0 {
		return nil
	}
	return f.connects[len(f.connects)-1]
}

func (f *fakeServer) numConnects() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.connects)
}

func (f *fakeServer) lastStream() *fakeStream {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams[len(f.streams)-1]
}

// received returns the requests seen so far and when they arrived.
func (f *fakeServer) received() ([]*api.Request, []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests), slices.Clone(f.reqTimes)
}

func (f *fakeServer) Session(ss api.Coord_SessionServer) error {
	first, err := ss.Recv()
	if err != nil {
		return err
	}
	cr := first.GetConnect()
	if cr == nil {
		return status.Error(codes.InvalidArgument, "first message must be connect")
	}
	f.mu.Lock()
	f.connects = append(f.connects, cr)
	reject := f.reject
	f.mu.Unlock()
	if reject != nil {
		if err := reject(cr); err != nil {
			return err
		}
	}
	s := &fakeStream{srv: f, out: make(chan outItem, 4096)}
	if err := f.cl.attach(s, cr); err != nil {
		return err
	}
	f.mu.Lock()
	f.streams = append(f.streams, s)
	f.mu.Unlock()

	done := make(chan error, 2)
	go func() { // the sender: one ordered stream of responses and events
		for it := range s.out {
			if it.msg != nil {
				if err := ss.Send(it.msg); err != nil {
					done <- err
					return
				}
			}
			if it.end {
				done <- it.err
				return
			}
		}
	}()
	go func() {
		for {
			m, err := ss.Recv()
			if err != nil {
				done <- err
				return
			}
			f.handle(s, m.GetRequest())
		}
	}()
	err = <-done
	f.cl.detach(s)
	return err
}

func (f *fakeServer) handle(s *fakeStream, req *api.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.reqTimes = append(f.reqTimes, time.Now())
	hook := f.hook
	f.mu.Unlock()
	if hook != nil && hook(s, req) {
		return
	}
	resp := f.cl.apply(s, req)
	msg := &api.ServerMessage{Msg: &api.ServerMessage_Response{Response: resp}}
	f.mu.Lock()
	if f.holding {
		f.held = append(f.held, msg)
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	s.send(msg)
	if _, ok := req.GetOp().(*api.Request_Close); ok {
		s.end(nil)
	}
}

// attach creates or re-attaches the session of cr on stream s, sends
// connected and the re-registration events.
func (cl *fakeCluster) attach(s *fakeStream, cr *api.ConnectRequest) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cr.GetLastZxid() > cl.zxid {
		return status.Error(codes.FailedPrecondition, "server behind the client")
	}
	var sess *fakeSession
	if cr.GetSessionId() == 0 {
		cl.zxid++
		sess = &fakeSession{id: cl.zxid, password: []byte("pw-" + time.Now().String())}
		cl.sessions[sess.id] = sess
	} else {
		sess = cl.sessions[cr.GetSessionId()]
		if sess == nil {
			return status.Error(codes.NotFound, "session expired")
		}
		if string(sess.password) != string(cr.GetPassword()) {
			return status.Error(codes.Unauthenticated, "bad password")
		}
	}
	if sess.out != nil {
		sess.out.end(status.Error(codes.Aborted, "session moved"))
	}
	sess.out, s.sess = s, sess
	sess.watches = map[watchKey]bool{}
	timeout := cr.GetTimeoutMs()
	if cl.timeoutMs != 0 {
		timeout = cl.timeoutMs
	}
	s.send(&api.ServerMessage{Msg: &api.ServerMessage_Connected{Connected: &api.ConnectResponse{
		SessionId: sess.id, Password: sess.password, TimeoutMs: timeout, Zxid: cl.zxid, ServerId: s.srv.addr,
	}}})
	ws, rel := cr.GetWatches(), cr.GetWatches().GetRelativeZxid()
	synth := func(p string, t vocab.EventType) {
		s.send(&api.ServerMessage{Msg: &api.ServerMessage_Event{Event: &api.WatchEvent{Type: int32(t), State: 3, Path: p, Zxid: -1}}})
	}
	for _, p := range ws.GetData() {
		switch n := cl.nodes[p]; {
		case n == nil:
			synth(p, vocab.EventNodeDeleted)
		case n.stat.Mzxid > rel:
			synth(p, vocab.EventNodeDataChanged)
		default:
			sess.watches[watchKey{p, kindData}] = true
		}
	}
	for _, p := range ws.GetExist() {
		if cl.nodes[p] != nil {
			synth(p, vocab.EventNodeCreated)
		} else {
			sess.watches[watchKey{p, kindData}] = true
		}
	}
	for _, p := range ws.GetChild() {
		switch n := cl.nodes[p]; {
		case n == nil:
			synth(p, vocab.EventNodeDeleted)
		case n.stat.Pzxid > rel:
			synth(p, vocab.EventNodeChildrenChanged)
		default:
			sess.watches[watchKey{p, kindChild}] = true
		}
	}
	for _, p := range ws.GetPersistent() {
		sess.watches[watchKey{p, kindPersistent}] = true
	}
	for _, p := range ws.GetPersistentRecursive() {
		sess.watches[watchKey{p, kindRecursive}] = true
	}
	return nil
}

// detach drops the session's watches when its stream ends, as the server
// does; the session itself lives on.
func (cl *fakeCluster) detach(s *fakeStream) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if s.sess != nil && s.sess.out == s {
		s.sess.out = nil
		s.sess.watches = nil
	}
}

// expire ends a session as the leader would: ephemerals go, the client gets
// an Expired event and the stream ends.
func (cl *fakeCluster) expire(id int64) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.closeSession(id)
	if sess := cl.sessions[id]; sess != nil && sess.out != nil {
		sess.out.send(&api.ServerMessage{Msg: &api.ServerMessage_Event{Event: &api.WatchEvent{Type: -1, State: -112}}})
		sess.out.end(nil)
	}
	delete(cl.sessions, id)
}

func (cl *fakeCluster) closeSession(id int64) {
	var eph []string
	for p, n := range cl.nodes {
		if n.stat.EphemeralOwner == id {
			eph = append(eph, p)
		}
	}
	slices.Sort(eph)
	for _, p := range eph {
		cl.zxid++
		cl.remove(p)
	}
}

// set changes a node's data as another client would, firing watches.
func (cl *fakeCluster) set(p string, data []byte) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.zxid++
	n := cl.nodes[p]
	n.data, n.null = data, data == nil
	n.stat.Version++
	n.stat.Mzxid = cl.zxid
	cl.fire(p, vocab.EventNodeDataChanged)
}

func (cl *fakeCluster) node(p string) *fakeNode {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.nodes[p]
}

// fire queues the events of one change, one per session at most, before any
// response that shows it.
func (cl *fakeCluster) fire(p string, t vocab.EventType) {
	if cl.collect != nil {
		*cl.collect = append(*cl.collect, fakeTrigger{p, t})
		return
	}
	ids := make([]int64, 0, len(cl.sessions))
	for id := range cl.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		sess := cl.sessions[id]
		w := sess.watches
		hit := false
		switch t {
		case vocab.EventNodeCreated, vocab.EventNodeDataChanged:
			hit = w[watchKey{p, kindData}] || w[watchKey{p, kindPersistent}]
			delete(w, watchKey{p, kindData})
		case vocab.EventNodeDeleted:
			hit = w[watchKey{p, kindData}] || w[watchKey{p, kindChild}] || w[watchKey{p, kindPersistent}]
			delete(w, watchKey{p, kindData})
			delete(w, watchKey{p, kindChild})
		case vocab.EventNodeChildrenChanged:
			hit = w[watchKey{p, kindChild}] || w[watchKey{p, kindPersistent}]
			delete(w, watchKey{p, kindChild})
		}
		if t != vocab.EventNodeChildrenChanged {
			for a, ok := p, true; ok && !hit; a, ok = parent(a) {
				hit = w[watchKey{a, kindRecursive}]
			}
		}
		if hit && sess.out != nil {
			sess.out.send(&api.ServerMessage{Msg: &api.ServerMessage_Event{Event: &api.WatchEvent{
				Type: int32(t), State: 3, Path: p, Zxid: cl.zxid,
			}}})
		}
	}
}

func (cl *fakeCluster) children(p string) []string {
	var out []string
	prefix := strings.TrimSuffix(p, "/") + "/"
	for q := range cl.nodes {
		if rest, ok := strings.CutPrefix(q, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out
}

func (cl *fakeCluster) stat(p string) *api.Stat {
	n := cl.nodes[p]
	st := n.stat
	return &api.Stat{
		Czxid: st.Czxid, Mzxid: st.Mzxid, Version: st.Version, Cversion: st.Cversion, Aversion: st.Aversion,
		EphemeralOwner: st.EphemeralOwner, DataLength: int32(len(n.data)),
		NumChildren: int32(len(cl.children(p))), Pzxid: st.Pzxid,
	}
}

func (cl *fakeCluster) remove(p string) {
	delete(cl.nodes, p)
	par, _ := parent(p)
	if pn := cl.nodes[par]; pn != nil {
		pn.stat.Pzxid = cl.zxid
	}
	cl.fire(p, vocab.EventNodeDeleted)
	cl.fire(par, vocab.EventNodeChildrenChanged)
}
