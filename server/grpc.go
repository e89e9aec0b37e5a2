package server

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/fsm"
	"coord/session"
	"coord/watch"
	"coord/zxid"
)

// coordService serves the client API's Session stream.
type coordService struct {
	api.UnimplementedCoordServer
	s *Server
}

// Session runs one client session's stream: connect, then requests in and
// responses and events out, in order.
func (cs *coordService) Session(stream api.Coord_SessionServer) error {
	s := cs.s
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	req := first.GetConnect()
	if req == nil {
		return status.Error(codes.InvalidArgument, "the first message of a session must be a ConnectRequest")
	}
	ip := peerIP(stream.Context())
	if !s.clientConns.acquire(ip) {
		s.metrics.connsRefused.WithLabelValues("per_address_limit").Inc()
		return status.Errorf(codes.ResourceExhausted, "too many connections from %s (max %d)", ip, s.cfg.MaxClientConns)
	}
	defer s.clientConns.release(ip)
	c, resp, err := s.connect(stream.Context(), req, ip)
	if err != nil {
		return err
	}
	if err := stream.Send(&api.ServerMessage{Msg: &api.ServerMessage_Connected{Connected: resp}}); err != nil {
		c.shut(err)
		return err
	}
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				// The client went away; its session lives on until it
				// re-attaches or expires.
				c.shut(nil)
				return
			}
			s.touchLocal(c.id)
			c.handle(msg.GetRequest())
		}
	}()
	for {
		msgs, ok := c.out.next()
		if !ok {
			if err := c.out.closeErr(); errors.Is(err, errLeaderLost) {
				// Tell the client why, so it moves to another server.
				return status.Error(codes.Unavailable, err.Error())
			}
			return nil
		}
		for _, m := range msgs {
			if err := stream.Send(m); err != nil {
				c.shut(err)
				return err
			}
		}
		c.out.written()
	}
}

func peerIP(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	return ipOf(p.Addr)
}

// ipOf is the caller's address as an "ip" ACL id: IPv4 unmapped, as
// ZooKeeper's getHostAddress gives it.
func ipOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		if v4 := ta.IP.To4(); v4 != nil {
			return v4.String()
		}
		return ta.IP.String()
	}
	return ""
}

// connect creates a session or re-attaches one, registers the connection
// here and answers the client.
func (s *Server) connect(ctx context.Context, req *api.ConnectRequest, ip string) (*conn, *api.ConnectResponse, error) {
	auth := []fsm.Id{}
	if ip != "" {
		auth = append(auth, fsm.Id{Scheme: "ip", ID: ip})
	}
	for _, a := range req.Auth {
		if a.GetScheme() != "digest" {
			return nil, nil, status.Errorf(codes.Unauthenticated, "unsupported auth scheme %q", a.GetScheme())
		}
		id, err := fsm.ParseAuthDigest(a.GetId())
		if err != nil {
			return nil, nil, status.Error(codes.Unauthenticated, err.Error())
		}
		auth = append(auth, id)
	}
	// A server cut off from its leader takes no session (leaderloss.go):
	// wait a little for contact, then send the client elsewhere.
	sctx, scancel := context.WithTimeout(ctx, s.leaderWait())
	err := s.waitServing(sctx)
	scancel()
	if err != nil {
		return nil, nil, status.Error(codes.Unavailable, err.Error())
	}
	// Never answer from a state older than what the client has seen: wait
	// a little for this server to catch up, then send the client elsewhere.
	if last := zxid.Zxid(req.LastZxid); last > s.fsm.fsm.LastZxid() {
		wctx, cancel := context.WithTimeout(ctx, s.leaderWait())
		for last > s.fsm.fsm.LastZxid() && wctx.Err() == nil {
			select {
			case <-s.fsm.appliedChanged():
			case <-wctx.Done():
			}
		}
		cancel()
		if last > s.fsm.fsm.LastZxid() {
			return nil, nil, status.Errorf(codes.FailedPrecondition,
				"client has seen zxid %v, this server only %v", last, s.fsm.fsm.LastZxid())
		}
	}
	var (
		id      int64
		timeout int32
		pw      []byte
	)
	owner := fmt.Sprintf("%s/%d", s.origin, s.connSeq.Add(1))
	if req.SessionId == 0 {
		timeout = s.cfg.bounds().Negotiate(req.TimeoutMs)
		cctx, cancel := context.WithTimeout(ctx, 2*s.leaderWait())
		ar, err := s.propose(cctx, &fsm.Command{Type: fsm.CmdCreateSession, Timeout: timeout, Owner: owner})
		cancel()
		if err == nil {
			err = ar.res.Err
		}
		if err != nil {
			return nil, nil, status.Errorf(codes.Unavailable, "creating session: %v", err)
		}
		id = ar.res.SessionID
		info, _ := s.fsm.fsm.View().Session(id)
		pw = info.Password
	} else {
		id = req.SessionId
		info, ok := s.fsm.fsm.View().Session(id)
		if !ok {
			return nil, nil, status.Errorf(codes.NotFound, "session 0x%x expired", id)
		}
		if !session.CheckPassword(info.Password, req.Password) {
			return nil, nil, status.Errorf(codes.Unauthenticated, "wrong password for session 0x%x", id)
		}
		timeout, pw = info.Timeout, info.Password
		// The session now belongs to this connection: once that is in the
		// log, anything still in flight on its old connection, here or on
		// another server, fails with SessionMoved.
		cctx, cancel := context.WithTimeout(ctx, 2*s.leaderWait())
		ar, err := s.propose(cctx, &fsm.Command{Type: fsm.CmdAttachSession, Session: id, Owner: owner})
		cancel()
		if err == nil && ar.res.Err != nil {
			return nil, nil, status.Errorf(codes.NotFound, "session 0x%x expired", id)
		}
		if err != nil {
			return nil, nil, status.Errorf(codes.Unavailable, "re-attaching session: %v", err)
		}
	}
	c := newConn(s, id, timeout, owner, auth)
	s.mu.Lock()
	old := s.conns[id]
	if old != nil {
		// The session moves to this new connection; its old watches here
		// go, the client re-registers them.
		delete(s.conns, id)
		s.watches.RemoveSession(id)
	}
	s.conns[id] = c
	s.mu.Unlock()
	if old != nil {
		old.shut(nil)
	}
	s.touchLocal(id)
	if w := req.Watches; w != nil {
		s.reattachWatches(c, w)
	}
	return c, &api.ConnectResponse{SessionId: id, Password: pw, TimeoutMs: timeout,
		Zxid: int64(s.fsm.fsm.LastZxid()), ServerId: s.cfg.ID}, nil
}

// reattachWatches re-registers a re-attaching client's watches, firing at
// once those whose node changed after the zxid the client last saw.
func (s *Server) reattachWatches(c *conn, w *api.WatchSet) {
	s.fsm.mu.RLock()
	defer s.fsm.mu.RUnlock()
	s.reattachLocked(c, s.fsm.fsm.View(), w)
}

// reattachLocked does reattachWatches with the apply lock held shared.
func (s *Server) reattachLocked(c *conn, v *fsm.View, w *api.WatchSet) {
	events, err := s.watches.Reattach(v, c.id, w.RelativeZxid, watch.WatchSet{
		DataWatches: w.Data, ExistWatches: w.Exist, ChildWatches: w.Child,
		PersistentWatches: w.Persistent, PersistentRecursiveWatches: w.PersistentRecursive,
	})
	if err != nil {
		s.log.Warn("re-registering watches", "session", sessionHex(c.id), "err", err)
	}
	for _, ev := range events {
		c.event(&api.WatchEvent{Type: int32(ev.Type), State: stateSyncConnected, Path: ev.Path, Zxid: ev.Zxid})
	}
}
