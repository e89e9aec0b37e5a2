package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"coord/fsm"
	"coord/server/sessions"
	"coord/vocab"
	"coord/watch"
	"coord/zk"
)

// The ZooKeeper protocol front end: unmodified ZooKeeper clients speak to
// the same sessions, request path and watches as gRPC clients. This file
// only translates: a jute request becomes the session layer's request
// (message.go) handed to conn.handle, and the session's ordered replies and
// events become jute replies and notifications, with nothing in between.

func (s *Server) startZK() error {
	lis, err := net.Listen("tcp", s.cfg.ZKAddr)
	if err != nil {
		return fmt.Errorf("server: ZooKeeper listener: %w", err)
	}
	if s.tls != nil {
		lis = &unifiedListener{Listener: lis, tls: s.tls.serverConfig(), tlsOnly: s.cfg.TLSOnly}
	}
	s.zkLis = lis
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.acceptZK(lis)
	}()
	if s.cfg.SecureZKAddr != "" {
		slis, err := net.Listen("tcp", s.cfg.SecureZKAddr)
		if err != nil {
			return fmt.Errorf("server: secure ZooKeeper listener: %w", err)
		}
		s.secureZKLis = tls.NewListener(slis, s.tls.serverConfig())
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.acceptZK(s.secureZKLis)
		}()
	}
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

// SecureZKAddr returns the TLS-only ZooKeeper port's address ("" when off).
func (s *Server) SecureZKAddr() string {
	if s.secureZKLis == nil {
		return ""
	}
	return s.secureZKLis.Addr().String()
}

// ZKAddr returns the ZooKeeper protocol listener's address ("" when off).
func (s *Server) ZKAddr() string {
	if s.zkLis == nil {
		return ""
	}
	return s.zkLis.Addr().String()
}

// zkTag is what the writer needs to shape a request's jute reply beyond
// what the session layer answers; it travels as the request's tag and
// comes back with the reply.
type zkTag struct {
	op    zk.OpCode
	multi []zk.OpCode // the types of a multi's results
	// marshalAt is 1 + the index of a multi's first op that fails the
	// whole multi with MarshallingError if it is reached (multiOp); 0 if none.
	marshalAt int
	close     bool      // close the connection after this reply
	start     time.Time // when the request arrived (its latency, zkstats.go)
}

// zkConn is one ZooKeeper protocol connection.
type zkConn struct {
	s   *Server
	nc  net.Conn
	c   *sessions.Conn
	max int

	stats *zkConnStats // what cons and stat report (zkstats.go)
}

func (s *Server) serveZK(nc net.Conn) {
	defer nc.Close()
	stats := newZKConnStats(s.metrics.zk, time.Now())
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
		s.metrics.zk.received.Add(1)
		s.fourLetterWord(nc, cmd)
		s.metrics.zk.sent.Add(1)
		return
	}
	frame, err := zk.ReadFrame(br, s.cfg.MaxFrameBytes)
	if err != nil {
		s.handshakeFailed(err)
		return
	}
	stats.packetReceived()
	arrived := time.Now()
	var creq zk.ConnectRequest
	if err := zk.Unmarshal(frame, &creq); err != nil {
		s.log.Info("bad ZooKeeper connect request", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.leaderWait())
	cr := &sessions.ConnectRequest{SessionID: creq.SessionID, Password: creq.Passwd,
		TimeoutMs: creq.TimeOut, LastZxid: creq.LastZxidSeen, ReadOnly: creq.ReadOnly}
	if id, ok := x509Identity(connTLSState(nc)); ok {
		cr.Auth = append(cr.Auth, id)
	}
	c, resp, err := s.sess.Connect(ctx, cr, ipOf(nc.RemoteAddr()))
	cancel()
	if err != nil {
		if errors.Is(err, sessions.ErrSessionExpired) || errors.Is(err, sessions.ErrWrongPassword) {
			// ZooKeeper answers an expired session or a wrong password
			// with a zero session, which clients report as expired.
			refusal := creq.Refusal()
			if _, err := nc.Write(zk.AppendConnectResponse(nil, &refusal)); err == nil {
				stats.packetSent()
			}
		}
		s.log.Info("ZooKeeper connect refused", "remote", nc.RemoteAddr(), "err", err)
		return
	}
	cresp := creq.Response(resp.TimeoutMs, resp.SessionID, resp.Password, resp.ReadOnly)
	if _, err := nc.Write(zk.AppendConnectResponse(nil, &cresp)); err != nil {
		c.Shut(err)
		return
	}
	stats.packetSent()
	if creq.SessionID == 0 {
		// A new session's connect is its createSession request (cxid 0),
		// as ZooKeeper counts it; a re-attach is no request.
		stats.replied(zk.OpCreateSession, 0, resp.Zxid, arrived)
	}
	zc := &zkConn{s: s, nc: nc, c: c, max: s.cfg.MaxFrameBytes, stats: stats}
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
	defer zc.c.Shut(nil)
	for {
		zc.nc.SetReadDeadline(time.Now().Add(timeout))
		frame, err := zk.ReadFrame(br, zc.max)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				zc.s.log.Debug("ZooKeeper connection read", "session", fmt.Sprintf("0x%x", zc.c.ID()), "err", err)
			}
			return
		}
		arrived := time.Now()
		zc.stats.packetReceived()
		zc.s.sess.Touch(zc.c.ID())
		h, body, err := zk.DecodeRequest(frame)
		if err != nil && h == (zk.RequestHeader{}) {
			return // not even a header: the stream is beyond saving
		}
		req, tag := zc.translate(h, body, err, arrived)
		zc.c.Handle(req)
		if tag.close {
			return
		}
	}
}

// zkKinds is the kind each ZooKeeper op code becomes: the ZooKeeper column
// of the session layer's table (sessions.OpInfo.ZooKeeper). An op code
// absent here is refused (OpRefuse).
var zkKinds = func() map[zk.OpCode]sessions.OpKind {
	byName := map[string]zk.OpCode{}
	for _, op := range zk.OpCodes() {
		byName[op.String()] = op
	}
	kinds := map[zk.OpCode]sessions.OpKind{}
	for _, k := range sessions.Kinds() {
		for _, name := range k.Info().ZooKeeper {
			op, ok := byName[name]
			if !ok {
				panic(fmt.Sprintf("server: the session layer's table names ZooKeeper op code %q for %v, which zk does not define", name, k))
			}
			kinds[op] = k
		}
	}
	return kinds
}()

// translate maps a decoded jute request to the session layer's request,
// with the tag its reply will need: the kind from its op code (zkKinds),
// the fields from its body. A request coord does not serve is refused with
// a code, in its place among the session's replies.
func (zc *zkConn) translate(h zk.RequestHeader, body zk.Record, decodeErr error, arrived time.Time) (*sessions.Request, zkTag) {
	tag := zkTag{op: h.Type, start: arrived}
	req := &sessions.Request{Xid: int64(h.Xid)}
	refuse := func(code vocab.Code, close bool) {
		req.Kind, req.Code, tag.close = sessions.OpRefuse, code, close
	}
	if decodeErr != nil {
		// An unknown op is answered Unimplemented and the connection closed;
		// a body that does not decode gets MarshallingError.
		code := zk.CodeOf(decodeErr)
		refuse(code, code == vocab.Unimplemented)
		req.Tag = tag
		return req, tag
	}
	req.Kind = zkKinds[h.Type]
	switch b := body.(type) {
	case nil:
		// ping, closeSession, whoAmI: the kind is the whole request.
	case *zk.CreateRequest:
		mode := b.Flags
		if h.Type == zk.OpCreateContainer && mode != vocab.ModeContainer {
			mode = -1 // ZooKeeper refuses a createContainer without the container flag
		}
		if h.Type != zk.OpCreateContainer && mode == vocab.ModeContainer {
			mode = -1
		}
		if mode.IsTTL() {
			mode = -1 // TTL modes come only with createTTL
		}
		req.Write = createOp(b.Path, b.Data, b.ACL, mode, 0)
	case *zk.CreateTTLRequest:
		mode := b.Flags
		if !mode.IsTTL() {
			mode = -1 // ZooKeeper: BadArguments
		}
		req.Write = createOp(b.Path, b.Data, b.ACL, mode, b.TTL)
	case *zk.DeleteRequest:
		req.Write = fsm.Op{Type: fsm.CmdDelete, Path: b.Path, Version: b.Version}
	case *zk.ExistsRequest:
		req.Path, req.Watch = b.Path, b.Watch
	case *zk.GetDataRequest:
		req.Path, req.Watch = b.Path, b.Watch
	case *zk.SetDataRequest:
		req.Write = fsm.Op{Type: fsm.CmdSetData, Path: b.Path, Data: b.Data, Version: b.Version}
	case *zk.GetACLRequest:
		req.Path = b.Path
	case *zk.SetACLRequest:
		req.Write = fsm.Op{Type: fsm.CmdSetACL, Path: b.Path, ACL: b.ACL, Version: b.Version}
	case *zk.GetChildrenRequest:
		req.Path, req.Watch = b.Path, b.Watch
	case *zk.GetChildren2Request:
		req.Path, req.Watch = b.Path, b.Watch
	case *zk.SyncRequest:
		req.Path = b.Path
	case *zk.MultiRequest:
		if req.Kind == sessions.OpMultiRead {
			// The results carry their reads' kinds: no op types needed.
			req.Reads = make([]sessions.ReadOp, len(b.Ops))
			for i, op := range b.Ops {
				kind := sessions.OpGetChildren
				if op.Type == zk.OpGetData {
					kind = sessions.OpGetData
				}
				req.Reads[i] = sessions.ReadOp{Kind: kind, Path: op.Path}
			}
			break
		}
		req.Writes = make([]fsm.Op, len(b.Ops))
		tag.multi = make([]zk.OpCode, len(b.Ops))
		for i, op := range b.Ops {
			var marshal bool
			req.Writes[i], tag.multi[i], marshal = multiOp(op)
			if marshal && tag.marshalAt == 0 {
				tag.marshalAt = i + 1
			}
		}
	case *zk.CheckWatchesRequest:
		req.Path, req.WatcherType = b.Path, watch.WatcherType(b.Type)
	case *zk.RemoveWatchesRequest:
		req.Path, req.WatcherType = b.Path, watch.WatcherType(b.Type)
	case *zk.AddWatchRequest:
		req.Path, req.WatchMode = b.Path, watch.AddWatchMode(b.Mode)
	case *zk.AuthPacket:
		req.Scheme, req.Auth = b.Scheme, b.Auth
	case *zk.SetWatches:
		req.Watches = &sessions.WatchSet{RelativeZxid: b.RelativeZxid, Watches: watch.WatchSet{
			DataWatches: b.DataWatches, ExistWatches: b.ExistWatches, ChildWatches: b.ChildWatches}}
	case *zk.SetWatches2:
		req.Watches = &sessions.WatchSet{RelativeZxid: b.RelativeZxid, Watches: watch.WatchSet{
			DataWatches: b.DataWatches, ExistWatches: b.ExistWatches, ChildWatches: b.ChildWatches,
			PersistentWatches: b.PersistentWatches, PersistentRecursiveWatches: b.PersistentRecursiveWatches}}
	case *zk.GetEphemeralsRequest:
		req.Path = b.PrefixPath
	case *zk.GetAllChildrenNumberRequest:
		req.Path = b.Path
	case *zk.ReconfigRequest:
		req.Reconfig = &sessions.ReconfigArgs{
			Joining: b.JoiningServers, Leaving: b.LeavingServers, NewMembers: b.NewMembers, FromConfig: b.CurConfigID}
	case *zk.SASLRequest:
		if len(zc.s.cfg.SASLUsers) == 0 {
			// No SASL users: Unimplemented, and the connection is closed.
			refuse(vocab.Unimplemented, true)
			break
		}
		req.Auth = b.Token
	case *zk.CheckVersionRequest, *zk.DeleteContainerRequest:
		// A standalone check and a client's deleteContainer are not
		// served (the table's OpRefuse row): Unimplemented, below.
	default:
		refuse(vocab.Unimplemented, true)
	}
	if req.Kind == sessions.OpRefuse && req.Code == vocab.OK {
		// An op code the table refuses: Unimplemented, and the connection
		// is closed.
		refuse(vocab.Unimplemented, true)
	}
	req.Tag = tag
	return req, tag
}

// createOp is a create with mode already checked against its op (-1 when
// ZooKeeper would refuse it with BadArguments). Jute's data is already in
// the session layer's form: nil is null data.
func createOp(path string, data []byte, acl []vocab.ACL, mode vocab.CreateMode, ttl int64) fsm.Op {
	return fsm.Op{Type: fsm.CmdCreate, Path: path, Data: data, ACL: acl, Mode: mode, TTL: ttl}
}

// multiOp is one op of a multi as the state machine takes it, with the op
// type its result reports. ZooKeeper rebuilds a multi's creates from their
// flags (MultiOperationRecord): the create's op type only matters for a
// TTL, which only createTTL carries, and the result is create2's for a
// container or TTL node and create's for any other. A TTL mode on another
// create type fails the whole multi with MarshallingError once every op
// before it has passed (marshal: the op applies as BadArguments, and the
// reply turns that into the header's error).
func multiOp(op zk.MultiOp) (w fsm.Op, result zk.OpCode, marshal bool) {
	switch op.Type {
	case zk.OpCreate, zk.OpCreate2, zk.OpCreateContainer, zk.OpCreateTTL:
		mode := op.Flags
		switch {
		case mode.IsTTL() && op.Type != zk.OpCreateTTL:
			return fsm.Op{}, zk.OpError, true
		case mode.IsTTL():
			return createOp(op.Path, op.Data, op.ACL, mode, op.TTL), zk.OpCreate2, false
		case mode == vocab.ModeContainer:
			return createOp(op.Path, op.Data, op.ACL, mode, 0), zk.OpCreate2, false
		}
		return createOp(op.Path, op.Data, op.ACL, mode, 0), zk.OpCreate, false
	case zk.OpDelete:
		return fsm.Op{Type: fsm.CmdDelete, Path: op.Path, Version: op.Version}, op.Type, false
	case zk.OpSetData:
		return fsm.Op{Type: fsm.CmdSetData, Path: op.Path, Data: op.Data, Version: op.Version}, op.Type, false
	case zk.OpCheck:
		return fsm.Op{Type: fsm.CmdCheck, Path: op.Path, Version: op.Version}, op.Type, false
	}
	return fsm.Op{}, op.Type, false // applies as BadArguments
}

// writeLoop sends the session's outbound messages as jute frames until the
// session's connection is shut.
func (zc *zkConn) writeLoop() {
	bw := bufio.NewWriterSize(zc.nc, 64<<10)
	var buf []byte
	for {
		msgs, ok := zc.c.Next()
		if !ok {
			bw.Flush()
			return
		}
		for _, m := range msgs {
			buf = buf[:0]
			closeAfter := false
			switch m := m.(type) {
			case *sessions.Event:
				buf = zk.AppendEvent(buf, -1, &zk.WatcherEvent{Type: zk.EventType(m.Type), State: m.State, Path: m.Path})
			case *sessions.Reply:
				if m.Err == vocab.ConnectionLoss || m.Err == vocab.SessionMoved {
					// ZooKeeper never sends ConnectionLoss, and answers a
					// request on a connection its session left
					// (SessionMoved) by closing it: the client reports the
					// loss itself.
					bw.Flush()
					zc.c.Shut(nil)
					return
				}
				tag, _ := m.Tag.(zkTag)
				buf = encodeReply(buf, tag, m)
				zc.stats.replied(tag.op, m.Xid, m.Zxid, tag.start)
				closeAfter = tag.close || ((tag.op == zk.OpAuth || tag.op == zk.OpSASL) && m.Err == vocab.AuthFailed)
			default:
				continue
			}
			if _, err := bw.Write(buf); err != nil {
				zc.c.Shut(err)
				return
			}
			zc.stats.packetSent()
			if closeAfter {
				bw.Flush()
				zc.c.Shut(nil)
				return
			}
		}
		if err := bw.Flush(); err != nil {
			zc.c.Shut(err)
			return
		}
		zc.c.Written()
	}
}

// encodeReply appends r as the jute reply to the request tag describes.
func encodeReply(dst []byte, tag zkTag, r *sessions.Reply) []byte {
	h := zk.ReplyHeader{Xid: int32(r.Xid), Zxid: r.Zxid, Err: r.Err}
	if r.Kind == sessions.OpRefuse {
		if r.Err == vocab.Unimplemented {
			h.Zxid = -1 // as ZooKeeper answers an op it does not know
		}
		return zk.AppendReply(dst, h, nil)
	}
	if tag.op == zk.OpAuth || tag.op == zk.OpSASL {
		h.Zxid = 0 // as ZooKeeper
	}
	if tag.op == zk.OpMulti && r.Body == sessions.BodyMulti {
		if tag.marshalAt > 0 && firstFailed(r.Multi) == tag.marshalAt-1 {
			h.Err = vocab.MarshallingError
			return zk.AppendReply(dst, h, nil)
		}
		// A failed multi's codes are in its results; the header says OK.
		return zk.AppendReply(dst, zk.ReplyHeader{Xid: h.Xid, Zxid: r.Zxid}, multiReply(tag, r.Multi))
	}
	if tag.op == zk.OpSASL && h.Err == vocab.AuthFailed {
		// ZooKeeper answers a failed SASL login with an empty token
		// (SetSASLResponse(null), length -1) after the AuthFailed header.
		// The Java client reads a token from every reply while its SASL
		// exchange runs, whatever the header says: without one it fails
		// on EOF, reconnects and tries again for ever instead of reporting
		// AuthFailed.
		return zk.AppendReply(dst, h, &zk.SASLResponse{Token: nil})
	}
	if h.Err != vocab.OK {
		return zk.AppendReply(dst, h, nil)
	}
	var body zk.Record
	switch tag.op {
	case zk.OpCreate:
		body = &zk.CreateResponse{Path: r.Path}
	case zk.OpCreate2, zk.OpCreateContainer, zk.OpCreateTTL:
		body = &zk.Create2Response{Path: r.Path, Stat: r.Stat}
	case zk.OpExists:
		body = &zk.ExistsResponse{Stat: r.Stat}
	case zk.OpGetData, zk.OpReconfig:
		body = &zk.GetDataResponse{Data: r.Data, Stat: r.Stat}
	case zk.OpSetData:
		body = &zk.SetDataResponse{Stat: r.Stat}
	case zk.OpSetACL:
		body = &zk.SetACLResponse{Stat: r.Stat}
	case zk.OpGetACL:
		body = &zk.GetACLResponse{ACL: r.ACL, Stat: r.Stat}
	case zk.OpGetChildren:
		body = &zk.GetChildrenResponse{Children: r.Children}
	case zk.OpGetChildren2:
		body = &zk.GetChildren2Response{Children: r.Children, Stat: r.Stat}
	case zk.OpSync:
		body = &zk.SyncResponse{Path: r.Path}
	case zk.OpGetAllChildrenNumber:
		body = &zk.GetAllChildrenNumberResponse{TotalNumber: r.Count}
	case zk.OpGetEphemerals:
		body = &zk.GetEphemeralsResponse{Ephemerals: r.Children}
	case zk.OpSASL:
		body = &zk.SASLResponse{Token: r.Data}
	case zk.OpWhoAmI:
		w := &zk.WhoAmIResponse{ClientInfo: make([]zk.ClientInfo, len(r.Clients))}
		for i, ci := range r.Clients {
			w.ClientInfo[i] = zk.ClientInfo{AuthScheme: ci.Scheme, User: ci.User}
		}
		body = w
	case zk.OpAddWatch:
		body = &zk.ErrorResponse{Err: vocab.OK}
	case zk.OpMultiRead:
		body = multiReadReply(r.Reads)
	}
	return zk.AppendReply(dst, h, body)
}

// multiReply is a multi's results as ZooKeeper reports them: every op an
// OpError with its code if any failed, else each op's result by its type.
func multiReply(tag zkTag, results []fsm.OpResult) *zk.MultiResponse {
	out := &zk.MultiResponse{Results: make([]zk.MultiResult, len(results))}
	failed := false
	for _, r := range results {
		failed = failed || r.Code != vocab.OK
	}
	for i, r := range results {
		res := zk.MultiResult{Type: zk.OpError, Err: r.Code}
		if !failed && i < len(tag.multi) {
			switch op := tag.multi[i]; op {
			case zk.OpCreate:
				res = zk.MultiResult{Type: zk.OpCreate, Path: r.Path}
			case zk.OpCreate2, zk.OpCreateContainer, zk.OpCreateTTL:
				res = zk.MultiResult{Type: zk.OpCreate2, Path: r.Path, Stat: r.Stat}
			case zk.OpSetData:
				res = zk.MultiResult{Type: zk.OpSetData, Stat: r.Stat}
			default:
				res = zk.MultiResult{Type: op}
			}
		}
		out.Results[i] = res
	}
	return out
}

// firstFailed is the index of a multi's op that failed it, or -1.
func firstFailed(results []fsm.OpResult) int {
	for i, r := range results {
		if r.Code != vocab.OK {
			return i
		}
	}
	return -1
}

// multiReadReply is a multiRead's results: a failed read as OpError with
// its code, the others by their kind.
func multiReadReply(reads []sessions.ReadResult) *zk.MultiResponse {
	out := &zk.MultiResponse{Results: make([]zk.MultiResult, len(reads))}
	for i, r := range reads {
		switch {
		case r.Err != vocab.OK:
			out.Results[i] = zk.MultiResult{Type: zk.OpError, Err: r.Err}
		case r.Kind == sessions.OpGetChildren:
			out.Results[i] = zk.MultiResult{Type: zk.OpGetChildren, Children: r.Children}
		default:
			out.Results[i] = zk.MultiResult{Type: zk.OpGetData, Data: r.Data, Stat: r.Stat}
		}
	}
	return out
}
