package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	"coord/api"
	"coord/fsm"
	"coord/server/sessions"
	"coord/vocab"
	"coord/watch"
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
	switch why := s.clientConns.acquire(ip); why {
	case "":
	case refusedTotal:
		s.metrics.connsRefused.WithLabelValues(why).Inc()
		return status.Errorf(codes.ResourceExhausted, "this server holds as many client connections as it may (%d); try another", s.clientConns.total)
	default:
		s.metrics.connsRefused.WithLabelValues(why).Inc()
		return status.Errorf(codes.ResourceExhausted, "too many connections from %s (max %d)", ip, s.cfg.MaxClientConns)
	}
	defer s.clientConns.release(ip)
	creq, err := connectFromAPI(req)
	if err != nil {
		return err
	}
	if p, ok := peer.FromContext(stream.Context()); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			if id, ok := x509Identity(&info.State); ok {
				creq.Auth = append(creq.Auth, id)
			}
		}
	}
	c, resp, err := s.sess.Connect(stream.Context(), creq, ip)
	if err != nil {
		return connectStatus(err)
	}
	connected := &api.ConnectResponse{SessionId: resp.SessionID, Password: resp.Password, TimeoutMs: resp.TimeoutMs,
		Zxid: resp.Zxid, ServerId: resp.ServerID}
	if err := stream.Send(&api.ServerMessage{Msg: &api.ServerMessage_Connected{Connected: connected}}); err != nil {
		c.Shut(err)
		return err
	}
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				// The client went away; its session lives on until it
				// re-attaches or expires.
				c.Shut(nil)
				return
			}
			c.Touch()
			if r := msg.GetRequest(); r != nil {
				c.Handle(requestFromAPI(r))
			}
		}
	}()
	for {
		msgs, ok := c.Next()
		if !ok {
			if err := c.CloseErr(); errors.Is(err, errLeaderLost) {
				// Tell the client why, so it moves to another server.
				return status.Error(codes.Unavailable, err.Error())
			}
			return nil
		}
		for _, m := range msgs {
			if err := stream.Send(messageToAPI(m)); err != nil {
				c.Shut(err)
				return err
			}
		}
		c.Written()
	}
}

// connectStatus is a refused Connect as a gRPC status: the client's own
// code for each reason (an expired session and a wrong password end its
// session; the others send it to another server).
func connectStatus(err error) error {
	code := codes.Unavailable
	switch {
	case errors.Is(err, sessions.ErrSessionExpired):
		code = codes.NotFound
	case errors.Is(err, sessions.ErrWrongPassword):
		code = codes.Unauthenticated
	case errors.Is(err, sessions.ErrBehind):
		code = codes.FailedPrecondition
	}
	return status.Error(code, err.Error())
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

// connectFromAPI is r as the session layer's connectRequest. Only digest
// identities are taken; anything else refuses the connection.
func connectFromAPI(r *api.ConnectRequest) (*sessions.ConnectRequest, error) {
	req := &sessions.ConnectRequest{SessionID: r.SessionId, Password: r.Password, TimeoutMs: r.TimeoutMs, LastZxid: r.LastZxid}
	for _, a := range r.Auth {
		if a.GetScheme() != "digest" {
			return nil, status.Errorf(codes.Unauthenticated, "unsupported auth scheme %q", a.GetScheme())
		}
		id, err := fsm.ParseAuthDigest(a.GetId())
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		req.Auth = append(req.Auth, id)
	}
	if r.Watches != nil {
		req.Watches = watchSetFromAPI(r.Watches)
	}
	return req, nil
}

// grpcKinds is the kind each field of api.Request's op oneof becomes (by
// the Go type that holds the field in Request.Op): the gRPC column of the
// session layer's table (sessions.OpInfo.GRPC). A field absent here is
// refused (OpRefuse). Keyed by type, the lookup costs a map access per
// request; protoreflect's WhichOneof costs ten times that.
var grpcKinds = func() map[reflect.Type]sessions.OpKind {
	od := (*api.Request)(nil).ProtoReflect().Descriptor().Oneofs().ByName("op")
	kinds := map[reflect.Type]sessions.OpKind{}
	for _, k := range sessions.Kinds() {
		name := k.Info().GRPC
		if name == "" {
			continue
		}
		fd := od.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			panic(fmt.Sprintf("server: the session layer's table names api.Request field %q for %v, which its op oneof does not have", name, k))
		}
		m := (&api.Request{}).ProtoReflect()
		m.Set(fd, m.NewField(fd))
		kinds[reflect.TypeOf(m.Interface().(*api.Request).Op)] = k
	}
	return kinds
}()

// requestFromAPI is r as the session layer's request: the kind from the
// field of its op that is set (grpcKinds), the other fields from that
// field's message.
func requestFromAPI(r *api.Request) *sessions.Request {
	req := &sessions.Request{Xid: r.Xid}
	if r.Op != nil {
		req.Kind = grpcKinds[reflect.TypeOf(r.Op)]
	}
	switch op := r.Op.(type) {
	case *api.Request_Ping, *api.Request_Close, *api.Request_WhoAmI:
		// The kind is the whole request.
	case *api.Request_Create:
		req.Write = createFromAPI(op.Create)
	case *api.Request_Delete:
		req.Write = deleteFromAPI(op.Delete)
	case *api.Request_SetData:
		req.Write = setDataFromAPI(op.SetData)
	case *api.Request_SetAcl:
		req.Write = fsm.Op{Type: fsm.CmdSetACL, Path: op.SetAcl.Path, ACL: api.ACLFromAPI(op.SetAcl.Acl), Version: op.SetAcl.Version}
	case *api.Request_Multi:
		req.Writes = make([]fsm.Op, len(op.Multi.Ops))
		for i, mo := range op.Multi.Ops {
			switch o := mo.Op.(type) {
			case *api.MultiOp_Create:
				req.Writes[i] = createFromAPI(o.Create)
			case *api.MultiOp_Delete:
				req.Writes[i] = deleteFromAPI(o.Delete)
			case *api.MultiOp_SetData:
				req.Writes[i] = setDataFromAPI(o.SetData)
			case *api.MultiOp_Check:
				req.Writes[i] = fsm.Op{Type: fsm.CmdCheck, Path: o.Check.Path, Version: o.Check.Version}
			} // else the zero Op, which applies as BadArguments
		}
	case *api.Request_GetData:
		req.Path, req.Watch = op.GetData.Path, op.GetData.Watch
	case *api.Request_Exists:
		req.Path, req.Watch = op.Exists.Path, op.Exists.Watch
	case *api.Request_GetChildren:
		req.Path, req.Watch = op.GetChildren.Path, op.GetChildren.Watch
	case *api.Request_GetAcl:
		req.Path = op.GetAcl.Path
	case *api.Request_Sync:
		req.Path = op.Sync.Path
	case *api.Request_AddWatch:
		req.Path, req.WatchMode = op.AddWatch.Path, vocab.AddWatchMode(op.AddWatch.Mode)
	case *api.Request_RemoveWatches:
		req.Path, req.WatcherType = op.RemoveWatches.Path, vocab.WatcherType(op.RemoveWatches.Type)
	case *api.Request_CheckWatches:
		req.Path, req.WatcherType = op.CheckWatches.Path, vocab.WatcherType(op.CheckWatches.Type)
	case *api.Request_Auth:
		req.Scheme, req.Auth = op.Auth.Scheme, op.Auth.Auth
	case *api.Request_GetAllChildrenNumber:
		req.Path = op.GetAllChildrenNumber.Path
	case *api.Request_GetEphemerals:
		req.Path = op.GetEphemerals.Prefix
	case *api.Request_MultiRead:
		req.Reads = make([]sessions.ReadOp, len(op.MultiRead.Ops))
		for i, mo := range op.MultiRead.Ops {
			switch o := mo.Op.(type) {
			case *api.MultiReadOp_GetData:
				req.Reads[i] = sessions.ReadOp{Kind: sessions.OpGetData, Path: o.GetData.Path}
			case *api.MultiReadOp_GetChildren:
				req.Reads[i] = sessions.ReadOp{Kind: sessions.OpGetChildren, Path: o.GetChildren.Path}
			} // else answered Unimplemented
		}
	case *api.Request_SetWatches:
		req.Watches = watchSetFromAPI(op.SetWatches)
	default:
		req.Kind = sessions.OpRefuse
	}
	if req.Kind == sessions.OpRefuse {
		req.Code = vocab.Unimplemented
	}
	return req
}

func createFromAPI(r *api.CreateRequest) fsm.Op {
	return fsm.Op{Type: fsm.CmdCreate, Path: r.Path, Data: api.DataFromAPI(r.Data, r.NullData), ACL: api.ACLFromAPI(r.Acl),
		Mode: vocab.CreateMode(r.Mode), TTL: r.Ttl}
}

func deleteFromAPI(r *api.DeleteRequest) fsm.Op {
	return fsm.Op{Type: fsm.CmdDelete, Path: r.Path, Version: r.Version}
}

func setDataFromAPI(r *api.SetDataRequest) fsm.Op {
	return fsm.Op{Type: fsm.CmdSetData, Path: r.Path, Data: api.DataFromAPI(r.Data, r.NullData), Version: r.Version}
}

func watchSetFromAPI(w *api.WatchSet) *sessions.WatchSet {
	return &sessions.WatchSet{RelativeZxid: w.RelativeZxid, Watches: watch.WatchSet{
		DataWatches: w.Data, ExistWatches: w.Exist, ChildWatches: w.Child,
		PersistentWatches: w.Persistent, PersistentRecursiveWatches: w.PersistentRecursive,
	}}
}

// messageToAPI is a reply or an event as the Session stream sends it.
func messageToAPI(m sessions.Message) *api.ServerMessage {
	switch m := m.(type) {
	case *sessions.Reply:
		return &api.ServerMessage{Msg: &api.ServerMessage_Response{Response: replyToAPI(m)}}
	case *sessions.Event:
		return &api.ServerMessage{Msg: &api.ServerMessage_Event{Event: &api.WatchEvent{
			Type: int32(m.Type), State: int32(m.State), Path: m.Path, Zxid: m.Zxid}}}
	}
	return nil
}

// replyToAPI is r as a protobuf Response.
func replyToAPI(r *sessions.Reply) *api.Response {
	resp := &api.Response{Xid: r.Xid, Zxid: r.Zxid, Err: int32(r.Err), ErrPath: r.ErrPath}
	switch r.Body {
	case sessions.BodyEmpty:
		resp.Result = &api.Response_Empty{Empty: &api.Empty{}}
	case sessions.BodyCreate:
		resp.Result = &api.Response_Create{Create: &api.CreateResponse{Path: r.Path, Stat: api.StatToAPI(r.Stat)}}
	case sessions.BodyStat:
		sr := &api.StatResponse{}
		if r.Err == vocab.OK {
			sr.Stat = api.StatToAPI(r.Stat)
		}
		resp.Result = &api.Response_Stat{Stat: sr}
	case sessions.BodyData:
		resp.Result = &api.Response_GetData{GetData: &api.GetDataResponse{Data: r.Data, NullData: r.Data == nil, Stat: api.StatToAPI(r.Stat), KindOwner: r.Owner}}
	case sessions.BodyChildren:
		resp.Result = &api.Response_GetChildren{GetChildren: &api.GetChildrenResponse{Children: r.Children, Stat: api.StatToAPI(r.Stat)}}
	case sessions.BodyACL:
		resp.Result = &api.Response_GetAcl{GetAcl: &api.GetACLResponse{Acl: api.ACLToAPI(r.ACL), Stat: api.StatToAPI(r.Stat)}}
	case sessions.BodyMulti:
		m := &api.MultiResponse{Results: make([]*api.MultiResult, len(r.Multi))}
		for i, op := range r.Multi {
			mr := &api.MultiResult{Err: int32(op.Code)}
			if op.Code == vocab.OK {
				switch op.Type {
				case fsm.CmdCreate:
					mr.Path, mr.Stat = op.Path, api.StatToAPI(op.Stat)
				case fsm.CmdSetData:
					mr.Stat = api.StatToAPI(op.Stat)
				}
			}
			m.Results[i] = mr
		}
		resp.Result = &api.Response_Multi{Multi: m}
	case sessions.BodyMultiRead:
		m := &api.MultiReadResponse{Results: make([]*api.MultiReadResult, len(r.Reads))}
		for i, rr := range r.Reads {
			res := &api.MultiReadResult{Err: int32(rr.Err)}
			switch rr.Kind {
			case sessions.OpGetData:
				res.Data, res.NullData, res.Stat = rr.Data, rr.Data == nil && rr.Err == vocab.OK, api.StatToAPI(rr.Stat)
			case sessions.OpGetChildren:
				res.Children, res.Stat = rr.Children, api.StatToAPI(rr.Stat)
			}
			m.Results[i] = res
		}
		resp.Result = &api.Response_MultiRead{MultiRead: m}
	case sessions.BodySync:
		resp.Result = &api.Response_Sync{Sync: &api.SyncResponse{Path: r.Path}}
	case sessions.BodyCount:
		resp.Result = &api.Response_Count{Count: &api.CountResponse{Count: r.Count}}
	case sessions.BodyPaths:
		resp.Result = &api.Response_Paths{Paths: &api.PathsResponse{Paths: r.Children}}
	case sessions.BodyWhoAmI:
		w := &api.WhoAmIResponse{}
		for _, ci := range r.Clients {
			w.ClientInfo = append(w.ClientInfo, &api.ClientInfo{AuthScheme: ci.Scheme, User: ci.User})
		}
		resp.Result = &api.Response_WhoAmI{WhoAmI: w}
	}
	return resp
}
