package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/fsm"
	"coord/zk"
)

// The ZooKeeper protocol front end: unmodified ZooKeeper clients speak to
// the same sessions, request path and watches as gRPC clients. This file
// only translates: a jute request becomes an api.Request handed to
// conn.handle, and the session's ordered outbound messages become jute
// replies and notifications.

func (s *Server) startZK() error {
	lis, err := net.Listen("tcp", s.cfg.ZKAddr)
	if err != nil {
		return fmt.Errorf("server: ZooKeeper listener: %w", err)
	}
	s.zkLis = lis
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.acceptZK(lis)
	}()
	return nil
}

// acceptZK accepts ZooKeeper connections until the server closes. An
// accept that fails (out of file descriptors, a connection aborted before
// it was accepted, ...) is retried after a short, growing pause, as Go's
// net/http server does: a burst of connections must never stop the
// listener for good.
func (s *Server) acceptZK(lis net.Listener) {
	var pause time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			select {
			case <-s.closing:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.log.Warn("ZooKeeper listener: accept failed; retrying", "err", err, "in", pause)
			s.metrics.acceptErrors.Inc()
			select {
			case <-s.closing:
				return
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		ip := ipOf(nc.RemoteAddr())
		if !s.clientConns.acquire(ip) {
			// ZooKeeper's maxClientCnxns: the connection is closed at once.
			s.log.Warn("too many connections from one address; closing", "ip", ip, "max", s.cfg.MaxClientConns)
			s.metrics.connsRefused.WithLabelValues("per_address_limit").Inc()
			nc.Close()
			continue
		}
		s.zkConns.Add(1)
		go func() {
			defer s.clientConns.release(ip)
			defer s.zkConns.Add(-1)
			s.serveZK(nc)
		}()
	}
}

// handshakeFailed counts a connection closed before its handshake because
// it sent nothing in time.
func (s *Server) handshakeFailed(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		s.metrics.connsRefused.WithLabelValues("handshake_timeout").Inc()
	}
}

// ZKAddr returns the ZooKeeper protocol listener's address ("" when off).
func (s *Server) ZKAddr() string {
	if s.zkLis == nil {
		return ""
	}
	return s.zkLis.Addr().String()
}

// zkPending is what the writer needs to encode a response: the request's
// op (and a multi's op types), in request order.
type zkPending struct {
	xid      int32
	op       zk.OpCode
	multi    []zk.OpCode
	override fsm.Code // answer with this code instead (ops coord refuses)
	close    bool     // close the connection after this reply
}

// zkConn is one ZooKeeper protocol connection.
type zkConn struct {
	s   *Server
	nc  net.Conn
	c   *conn
	max int

	mu      sync.Mutex
	pending []zkPending

	received, sent atomic.Int64
	lastOp         atomic.Value // string
	lastXid        atomic.Int64
	established    time.Time
}

func (s *Server) serveZK(nc net.Conn) {
	defer nc.Close()
	br := bufio.NewReaderSize(nc, 64<<10)
	// The connect request (or a four-letter word) must come within the
	// handshake timeout (ZooKeeper: sessionlessCnxnTimeout, 10 s).
	nc.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	prefix, err := br.Peek(4)
	if err != nil {
		s.handshakeFailed(err)
		return
	}
	if cmd, ok := zk.IsFourLetterWord(prefix); ok {
		s.fourLetterWord(nc, cmd)
		return
	}
	frame, err := zk.ReadFrame(br, s.cfg.MaxFrameBytes)
	if err != nil {
		s.handshakeFailed(err)
		return
	}
	var creq zk.ConnectRequest
	if err := zk.Unmarshal(frame, &creq); err != nil {
		s.log.Info("bad ZooKeeper connect request", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.leaderWait())
	c, resp, err := s.connect(ctx, &api.ConnectRequest{SessionId: creq.SessionID, Password: creq.Passwd,
		TimeoutMs: creq.TimeOut, LastZxid: creq.LastZxidSeen}, ipOf(nc.RemoteAddr()))
	cancel()
	if err != nil {
		switch status.Code(err) {
		case codes.NotFound, codes.Unauthenticated:
			// ZooKeeper answers an expired session or a wrong password
			// with a zero session, which clients report as expired.
			refusal := creq.Refusal()
			nc.Write(zk.AppendConnectResponse(nil, &refusal))
		}
		s.log.Info("ZooKeeper connect refused", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	cresp := creq.Response(resp.TimeoutMs, resp.SessionId, resp.Password, false)
	if _, err := nc.Write(zk.AppendConnectResponse(nil, &cresp)); err != nil {
		c.shut(err)
		return
	}
	zc := &zkConn{s: s, nc: nc, c: c, max: s.cfg.MaxFrameBytes, established: time.Now()}
	zc.lastOp.Store("NA")
	zc.lastXid.Store(-1)
	s.mu.Lock()
	s.zkByConn[c] = zc
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.zkByConn, c)
		s.mu.Unlock()
	}()
	go zc.readLoop(br, time.Duration(resp.TimeoutMs)*time.Millisecond)
	zc.writeLoop()
}

// readLoop reads requests until the client goes away or sends something
// that ends the connection. A client silent for longer than its session
// timeout is disconnected (its session then expires unless it re-attaches).
func (zc *zkConn) readLoop(br *bufio.Reader, timeout time.Duration) {
	defer zc.c.shut(nil)
	for {
		zc.nc.SetReadDeadline(time.Now().Add(timeout))
		frame, err := zk.ReadFrame(br, zc.max)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				zc.s.log.Debug("ZooKeeper connection read", "session", sessionHex(zc.c.id), "err", err)
			}
			return
		}
		zc.received.Add(1)
		zc.s.touchLocal(zc.c.id)
		h, body, err := zk.DecodeRequest(frame)
		if err != nil && h == (zk.RequestHeader{}) {
			return // not even a header: the stream is beyond saving
		}
		req, p := zc.translate(h, body, err)
		zc.lastOp.Store(zk.LastOpName(h.Type))
		if h.Xid >= 0 {
			zc.lastXid.Store(int64(h.Xid))
		}
		zc.mu.Lock()
		zc.pending = append(zc.pending, p)
		zc.mu.Unlock()
		zc.c.handle(req)
		if p.close {
			return
		}
	}
}

// translate maps a decoded jute request to the one request path's form.
func (zc *zkConn) translate(h zk.RequestHeader, body zk.Record, decodeErr error) (*api.Request, zkPending) {
	p := zkPending{xid: h.Xid, op: h.Type}
	req := &api.Request{Xid: int64(h.Xid)}
	if decodeErr != nil {
		// An unknown op is answered Unimplemented and the connection closed;
		// a body that does not decode gets MarshallingError.
		p.override = zk.CodeOf(decodeErr)
		p.close = p.override == fsm.Unimplemented
		return req, p
	}
	switch b := body.(type) {
	case nil:
		switch h.Type {
		case zk.OpPing:
			req.Op = &api.Request_Ping{Ping: &api.Ping{}}
		case zk.OpCloseSession:
			req.Op = &api.Request_Close{Close: &api.CloseSession{}}
		case zk.OpWhoAmI:
			req.Op = &api.Request_WhoAmI{WhoAmI: &api.WhoAmIRequest{}}
		}
	case *zk.CreateRequest:
		mode := b.Flags
		if h.Type == zk.OpCreateContainer && mode != fsm.ModeContainer {
			mode = -1 // ZooKeeper refuses a createContainer without the container flag
		}
		if h.Type != zk.OpCreateContainer && mode == fsm.ModeContainer {
			mode = -1
		}
		if mode.IsTTL() {
			mode = -1 // TTL modes come only with createTTL
		}
		req.Op = &api.Request_Create{Create: createToAPI(b.Path, b.Data, b.ACL, mode, 0)}
	case *zk.CreateTTLRequest:
		mode := b.Flags
		if !mode.IsTTL() {
			mode = -1 // ZooKeeper: BadArguments
		}
		req.Op = &api.Request_Create{Create: createToAPI(b.Path, b.Data, b.ACL, mode, b.TTL)}
	case *zk.DeleteRequest:
		req.Op = &api.Request_Delete{Delete: &api.DeleteRequest{Path: b.Path, Version: b.Version}}
	case *zk.ExistsRequest:
		req.Op = &api.Request_Exists{Exists: &api.ExistsRequest{Path: b.Path, Watch: b.Watch}}
	case *zk.GetDataRequest:
		req.Op = &api.Request_GetData{GetData: &api.GetDataRequest{Path: b.Path, Watch: b.Watch}}
	case *zk.SetDataRequest:
		req.Op = &api.Request_SetData{SetData: &api.SetDataRequest{Path: b.Path, Data: b.Data, NullData: b.Data == nil, Version: b.Version}}
	case *zk.GetACLRequest:
		req.Op = &api.Request_GetAcl{GetAcl: &api.GetACLRequest{Path: b.Path}}
	case *zk.SetACLRequest:
		req.Op = &api.Request_SetAcl{SetAcl: &api.SetACLRequest{Path: b.Path, Acl: api.ACLToAPI(b.ACL), Version: b.Version}}
	case *zk.GetChildrenRequest:
		req.Op = &api.Request_GetChildren{GetChildren: &api.GetChildrenRequest{Path: b.Path, Watch: b.Watch}}
	case *zk.GetChildren2Request:
		req.Op = &api.Request_GetChildren{GetChildren: &api.GetChildrenRequest{Path: b.Path, Watch: b.Watch}}
	case *zk.SyncRequest:
		req.Op = &api.Request_Sync{Sync: &api.SyncRequest{Path: b.Path}}
	case *zk.MultiRequest:
		if h.Type == zk.OpMultiRead {
			m := &api.MultiReadRequest{}
			for _, op := range b.Ops {
				p.multi = append(p.multi, op.Type)
				if op.Type == zk.OpGetData {
					m.Ops = append(m.Ops, &api.MultiReadOp{Op: &api.MultiReadOp_GetData{GetData: &api.GetDataRequest{Path: op.Path}}})
				} else {
					m.Ops = append(m.Ops, &api.MultiReadOp{Op: &api.MultiReadOp_GetChildren{GetChildren: &api.GetChildrenRequest{Path: op.Path}}})
				}
			}
			req.Op = &api.Request_MultiRead{MultiRead: m}
			break
		}
		m := &api.MultiRequest{}
		for _, op := range b.Ops {
			p.multi = append(p.multi, op.Type)
			m.Ops = append(m.Ops, multiOpToAPI(op))
		}
		req.Op = &api.Request_Multi{Multi: m}
	case *zk.CheckWatchesRequest:
		req.Op = &api.Request_CheckWatches{CheckWatches: &api.CheckWatchesRequest{Path: b.Path, Type: int32(b.Type)}}
	case *zk.RemoveWatchesRequest:
		req.Op = &api.Request_RemoveWatches{RemoveWatches: &api.RemoveWatchesRequest{Path: b.Path, Type: int32(b.Type)}}
	case *zk.AddWatchRequest:
		req.Op = &api.Request_AddWatch{AddWatch: &api.AddWatchRequest{Path: b.Path, Mode: int32(b.Mode)}}
	case *zk.AuthPacket:
		req.Op = &api.Request_Auth{Auth: &api.AuthRequest{Scheme: b.Scheme, Auth: b.Auth}}
	case *zk.SetWatches:
		req.Op = &api.Request_SetWatches{SetWatches: &api.WatchSet{RelativeZxid: b.RelativeZxid,
			Data: b.DataWatches, Exist: b.ExistWatches, Child: b.ChildWatches}}
	case *zk.SetWatches2:
		req.Op = &api.Request_SetWatches{SetWatches: &api.WatchSet{RelativeZxid: b.RelativeZxid,
			Data: b.DataWatches, Exist: b.ExistWatches, Child: b.ChildWatches,
			Persistent: b.PersistentWatches, PersistentRecursive: b.PersistentRecursiveWatches}}
	case *zk.GetEphemeralsRequest:
		req.Op = &api.Request_GetEphemerals{GetEphemerals: &api.GetEphemeralsRequest{Prefix: b.PrefixPath}}
	case *zk.GetAllChildrenNumberRequest:
		req.Op = &api.Request_GetAllChildrenNumber{GetAllChildrenNumber: &api.GetAllChildrenNumberRequest{Path: b.Path}}
	case *zk.ReconfigRequest:
		p.override = fsm.ReconfigDisabled // membership changes go through coord's Admin API
	case *zk.CheckVersionRequest, *zk.DeleteContainerRequest, *zk.SASLRequest:
		// A standalone check, a client's deleteContainer and SASL are not
		// served: Unimplemented, and the connection is closed.
		p.override, p.close = fsm.Unimplemented, true
	default:
		p.override, p.close = fsm.Unimplemented, true
	}
	return req, p
}

func createToAPI(path string, data []byte, acl []fsm.ACL, mode fsm.CreateMode, ttl int64) *api.CreateRequest {
	return &api.CreateRequest{Path: path, Data: data, NullData: data == nil, Acl: api.ACLToAPI(acl), Mode: int32(mode), Ttl: ttl}
}

func multiOpToAPI(op zk.MultiOp) *api.MultiOp {
	switch op.Type {
	case zk.OpCreate, zk.OpCreate2, zk.OpCreateContainer, zk.OpCreateTTL:
		mode := op.Flags
		switch {
		case op.Type == zk.OpCreateTTL && !mode.IsTTL(), op.Type != zk.OpCreateTTL && mode.IsTTL(),
			op.Type == zk.OpCreateContainer && mode != fsm.ModeContainer:
			mode = -1
		}
		ttl := int64(0)
		if op.Type == zk.OpCreateTTL {
			ttl = op.TTL
		}
		return &api.MultiOp{Op: &api.MultiOp_Create{Create: createToAPI(op.Path, op.Data, op.ACL, mode, ttl)}}
	case zk.OpDelete:
		return &api.MultiOp{Op: &api.MultiOp_Delete{Delete: &api.DeleteRequest{Path: op.Path, Version: op.Version}}}
	case zk.OpSetData:
		return &api.MultiOp{Op: &api.MultiOp_SetData{SetData: &api.SetDataRequest{Path: op.Path, Data: op.Data, NullData: op.Data == nil, Version: op.Version}}}
	case zk.OpCheck:
		return &api.MultiOp{Op: &api.MultiOp_Check{Check: &api.CheckRequest{Path: op.Path, Version: op.Version}}}
	}
	return &api.MultiOp{} // applies as BadArguments
}

// writeLoop sends the session's outbound messages as jute frames until the
// session's connection is shut.
func (zc *zkConn) writeLoop() {
	bw := bufio.NewWriterSize(zc.nc, 64<<10)
	var buf []byte
	for {
		msgs, ok := zc.c.out.next()
		if !ok {
			bw.Flush()
			return
		}
		for _, m := range msgs {
			buf = buf[:0]
			closeAfter := false
			switch x := m.Msg.(type) {
			case *api.ServerMessage_Event:
				ev := x.Event
				buf = zk.AppendEvent(buf, -1, &zk.WatcherEvent{Type: zk.EventType(ev.Type), State: zk.KeeperState(ev.State), Path: ev.Path})
			case *api.ServerMessage_Response:
				zc.mu.Lock()
				if len(zc.pending) == 0 {
					zc.mu.Unlock()
					continue // cannot happen: one response per request
				}
				p := zc.pending[0]
				zc.pending = zc.pending[1:]
				zc.mu.Unlock()
				if (x.Response.Err == int32(fsm.ConnectionLoss) || x.Response.Err == int32(fsm.SessionMoved)) && p.override == fsm.OK {
					// ZooKeeper never sends ConnectionLoss, and answers a
					// request on a connection its session left
					// (SessionMoved) by closing it: the client reports the
					// loss itself.
					bw.Flush()
					zc.c.shut(nil)
					return
				}
				buf = zc.encodeReply(buf, p, x.Response)
				closeAfter = p.close || (p.op == zk.OpAuth && x.Response.Err == int32(fsm.AuthFailed))
			default:
				continue
			}
			if _, err := bw.Write(buf); err != nil {
				zc.c.shut(err)
				return
			}
			zc.sent.Add(1)
			if closeAfter {
				bw.Flush()
				zc.c.shut(nil)
				return
			}
		}
		if err := bw.Flush(); err != nil {
			zc.c.shut(err)
			return
		}
		zc.c.out.written()
	}
}

// encodeReply turns a response into the jute reply of the request's op.
func (zc *zkConn) encodeReply(dst []byte, p zkPending, r *api.Response) []byte {
	h := zk.ReplyHeader{Xid: p.xid, Zxid: r.Zxid, Err: fsm.Code(r.Err)}
	if p.override != fsm.OK {
		h.Err = p.override
		if p.override == fsm.Unimplemented {
			h.Zxid = -1 // as ZooKeeper answers an op it does not know
		}
		return zk.AppendReply(dst, h, nil)
	}
	if p.op == zk.OpAuth {
		h.Zxid = 0 // as ZooKeeper
	}
	if p.op == zk.OpMulti && r.GetMulti() != nil {
		return zk.AppendReply(dst, zk.ReplyHeader{Xid: p.xid, Zxid: r.Zxid}, multiReply(p, r.GetMulti()))
	}
	if h.Err != fsm.OK {
		return zk.AppendReply(dst, h, nil)
	}
	var body zk.Record
	switch p.op {
	case zk.OpCreate:
		body = &zk.CreateResponse{Path: r.GetCreate().GetPath()}
	case zk.OpCreate2, zk.OpCreateContainer, zk.OpCreateTTL:
		body = &zk.Create2Response{Path: r.GetCreate().GetPath(), Stat: api.StatFromAPI(r.GetCreate().GetStat())}
	case zk.OpExists:
		body = &zk.ExistsResponse{Stat: api.StatFromAPI(r.GetStat().GetStat())}
	case zk.OpGetData:
		g := r.GetGetData()
		data := g.GetData()
		if g.GetNullData() {
			data = nil
		} else if data == nil {
			data = []byte{}
		}
		body = &zk.GetDataResponse{Data: data, Stat: api.StatFromAPI(g.GetStat())}
	case zk.OpSetData:
		body = &zk.SetDataResponse{Stat: api.StatFromAPI(r.GetStat().GetStat())}
	case zk.OpSetACL:
		body = &zk.SetACLResponse{Stat: api.StatFromAPI(r.GetStat().GetStat())}
	case zk.OpGetACL:
		body = &zk.GetACLResponse{ACL: api.ACLFromAPI(r.GetGetAcl().GetAcl()), Stat: api.StatFromAPI(r.GetGetAcl().GetStat())}
	case zk.OpGetChildren:
		body = &zk.GetChildrenResponse{Children: nonNil(r.GetGetChildren().GetChildren())}
	case zk.OpGetChildren2:
		body = &zk.GetChildren2Response{Children: nonNil(r.GetGetChildren().GetChildren()), Stat: api.StatFromAPI(r.GetGetChildren().GetStat())}
	case zk.OpSync:
		body = &zk.SyncResponse{Path: r.GetSync().GetPath()}
	case zk.OpGetAllChildrenNumber:
		body = &zk.GetAllChildrenNumberResponse{TotalNumber: r.GetCount().GetCount()}
	case zk.OpGetEphemerals:
		body = &zk.GetEphemeralsResponse{Ephemerals: nonNil(r.GetPaths().GetPaths())}
	case zk.OpWhoAmI:
		w := &zk.WhoAmIResponse{ClientInfo: []zk.ClientInfo{}}
		for _, ci := range r.GetWhoAmI().GetClientInfo() {
			w.ClientInfo = append(w.ClientInfo, zk.ClientInfo{AuthScheme: ci.AuthScheme, User: ci.User})
		}
		body = w
	case zk.OpAddWatch:
		body = &zk.ErrorResponse{Err: fsm.OK}
	case zk.OpMultiRead:
		body = multiReadReply(p, r.GetMultiRead())
	}
	return zk.AppendReply(dst, h, body)
}

func multiReply(p zkPending, m *api.MultiResponse) *zk.MultiResponse {
	out := &zk.MultiResponse{Results: make([]zk.MultiResult, len(m.Results))}
	failed := false
	for _, r := range m.Results {
		failed = failed || r.Err != 0
	}
	for i, r := range m.Results {
		res := zk.MultiResult{Type: zk.OpError, Err: fsm.Code(r.Err)}
		if !failed && i < len(p.multi) {
			switch op := p.multi[i]; op {
			case zk.OpCreate:
				res = zk.MultiResult{Type: zk.OpCreate, Path: r.Path}
			case zk.OpCreate2, zk.OpCreateContainer, zk.OpCreateTTL:
				res = zk.MultiResult{Type: zk.OpCreate2, Path: r.Path, Stat: api.StatFromAPI(r.Stat)}
			case zk.OpSetData:
				res = zk.MultiResult{Type: zk.OpSetData, Stat: api.StatFromAPI(r.Stat)}
			default:
				res = zk.MultiResult{Type: op}
			}
		}
		out.Results[i] = res
	}
	return out
}

func multiReadReply(p zkPending, m *api.MultiReadResponse) *zk.MultiResponse {
	out := &zk.MultiResponse{Results: make([]zk.MultiResult, len(m.GetResults()))}
	for i, r := range m.GetResults() {
		if r.Err != 0 {
			out.Results[i] = zk.MultiResult{Type: zk.OpError, Err: fsm.Code(r.Err)}
			continue
		}
		if i < len(p.multi) && p.multi[i] == zk.OpGetChildren {
			out.Results[i] = zk.MultiResult{Type: zk.OpGetChildren, Children: nonNil(r.Children)}
			continue
		}
		data := r.Data
		if r.NullData {
			data = nil
		} else if data == nil {
			data = []byte{}
		}
		out.Results[i] = zk.MultiResult{Type: zk.OpGetData, Data: data, Stat: api.StatFromAPI(r.Stat)}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
