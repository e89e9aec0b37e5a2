package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"coord/api"
	"coord/fsm"
	"coord/watch"
)

// This file is the one request path of a session: both front ends (gRPC
// and, later, the ZooKeeper wire protocol) turn their requests into
// api.Request and their answers come back as api.Response.

// handle runs one request of the session. Writes are submitted at once (so a
// session's writes pipeline) and answered when applied here; reads, syncs
// and watch calls first wait for the session's earlier writes, so the
// session always reads its own writes, and keep request order.
func (c *conn) handle(req *api.Request) {
	if req == nil {
		return
	}
	start := time.Now()
	op := opName(req)
	if cmd, ok := c.writeCommand(req); ok {
		c.write(req.Xid, cmd, op, start)
		return
	}
	if sy, ok := req.Op.(*api.Request_Sync); ok {
		c.sync(req.Xid, sy.Sync.Path, start)
		return
	}
	c.waitWrites()
	sl := c.out.reserve()
	if sl == nil {
		return
	}
	c.read(sl, req, op, start)
}

// answer fills a response slot and counts the request.
func (c *conn) answer(sl *slot, resp *api.Response, op string, start time.Time) {
	// Count first: once the slot is filled the client may already have
	// the answer (and read the metrics).
	c.s.metrics.observe(op, resp.Err, start)
	c.out.fill(sl, &api.ServerMessage{Msg: &api.ServerMessage_Response{Response: resp}})
}

func errResponse(err error) *api.Response {
	r := &api.Response{Err: int32(fsm.CodeOf(err))}
	var fe *fsm.Error
	if errors.As(err, &fe) {
		r.ErrPath = fe.Path
	}
	return r
}

// write submits cmd and answers from inside apply.
func (c *conn) write(xid int64, cmd *fsm.Command, op string, start time.Time) {
	sl := c.out.reserve()
	if sl == nil {
		return
	}
	c.mu.Lock()
	failed := c.failed
	if cmd.Type == fsm.CmdCloseSession {
		c.closingClient = true
	}
	c.mu.Unlock()
	if failed {
		// An earlier write's fate is unknown: nothing after it may take
		// effect, or the session's order could break. The connection is
		// closing; the client re-attaches and finds out.
		c.answer(sl, &api.Response{Xid: xid, Err: int32(fsm.ConnectionLoss)}, op, start)
		return
	}
	if res, refused := fsm.RefuseOversize(cmd, c.s.cfg.MaxDataBytes); refused {
		// Refused before the log: nothing changed, and the connection stays.
		res.Zxid = c.s.fsm.fsm.LastZxid()
		resp := writeResponse(cmd, res)
		resp.Xid = xid
		c.answer(sl, resp, op, start)
		return
	}
	c.beginWrite()
	c.s.submit(cmd, func(ar applyResult) {
		defer c.endWrite()
		var resp *api.Response
		if errors.Is(ar.err, errRefused) {
			// Refused before reaching the log: nothing changed, and the
			// connection stays.
			resp = &api.Response{Xid: xid, Err: int32(fsm.SystemError), Zxid: int64(c.s.fsm.fsm.LastZxid())}
			c.answer(sl, resp, op, start)
			return
		}
		if ar.err != nil {
			c.mu.Lock()
			c.failed = true
			c.mu.Unlock()
			// The entry's fate is unknown (lost leader, server stopping):
			// answer ConnectionLoss and drop the connection so the client
			// re-attaches and finds out, as with ZooKeeper.
			resp = &api.Response{Err: int32(fsm.ConnectionLoss)}
		} else {
			resp = writeResponse(cmd, ar.res)
		}
		resp.Xid = xid
		c.answer(sl, resp, op, start)
		if ar.err != nil {
			c.s.log.Info("write failed; closing client connection", "session", sessionHex(c.id), "err", ar.err)
			go c.shut(ar.err)
		} else if cmd.Type == fsm.CmdCloseSession {
			go c.shut(nil)
		}
	})
}

func writeResponse(cmd *fsm.Command, res fsm.Result) *api.Response {
	r := errResponse(res.Err)
	r.Zxid = int64(res.Zxid)
	switch cmd.Type {
	case fsm.CmdMulti:
		if res.Err != nil && res.Multi == nil {
			return r // the session was gone: no per-op results
		}
		m := &api.MultiResponse{Results: make([]*api.MultiResult, len(res.Multi))}
		for i, op := range res.Multi {
			mr := &api.MultiResult{Err: int32(op.Code)}
			if op.Code == fsm.OK {
				switch op.Type {
				case fsm.CmdCreate:
					mr.Path, mr.Stat = op.Path, api.StatToAPI(op.Stat)
				case fsm.CmdSetData:
					mr.Stat = api.StatToAPI(op.Stat)
				}
			}
			m.Results[i] = mr
		}
		r.Result = &api.Response_Multi{Multi: m}
	case fsm.CmdCreate:
		if res.Err == nil {
			r.Result = &api.Response_Create{Create: &api.CreateResponse{Path: res.Path, Stat: api.StatToAPI(res.Stat)}}
		}
	case fsm.CmdSetData, fsm.CmdSetACL:
		if res.Err == nil {
			r.Result = &api.Response_Stat{Stat: &api.StatResponse{Stat: api.StatToAPI(res.Stat)}}
		}
	default:
		r.Result = &api.Response_Empty{Empty: &api.Empty{}}
	}
	return r
}

// sync answers once this server has applied everything the leader had
// committed when the sync arrived.
func (c *conn) sync(xid int64, path string, start time.Time) {
	c.waitWrites()
	sl := c.out.reserve()
	if sl == nil {
		return
	}
	c.beginWrite() // later reads wait for the sync, as they would for a write
	go func() {
		defer c.endWrite()
		ctx, cancel := context.WithTimeout(context.Background(), 2*c.s.leaderWait())
		defer cancel()
		resp := &api.Response{Xid: xid, Result: &api.Response_Sync{Sync: &api.SyncResponse{Path: path}}}
		idx, err := c.s.syncIndex(ctx)
		if err == nil {
			err = c.s.waitApplied(ctx, idx)
		}
		if err != nil {
			resp = &api.Response{Xid: xid, Err: int32(fsm.ConnectionLoss)}
		}
		// Answer under the apply lock, as a read: events of later applies
		// follow the response.
		c.s.fsm.mu.RLock()
		defer c.s.fsm.mu.RUnlock()
		resp.Zxid = int64(c.s.fsm.fsm.LastZxid())
		c.answer(sl, resp, "sync", start)
	}()
}

func nullable(data []byte, null bool) []byte {
	if null {
		return nil
	}
	if data == nil {
		return []byte{}
	}
	return data
}

func createOp(r *api.CreateRequest) fsm.Op {
	return fsm.Op{Type: fsm.CmdCreate, Path: r.Path, Data: nullable(r.Data, r.NullData), ACL: api.ACLFromAPI(r.Acl),
		Mode: fsm.CreateMode(r.Mode), TTL: r.Ttl}
}

// writeCommand maps a write request to its command.
func (c *conn) writeCommand(req *api.Request) (*fsm.Command, bool) {
	cmd := &fsm.Command{Session: c.id, Auth: c.identities(), Owner: c.owner}
	switch op := req.Op.(type) {
	case *api.Request_Create:
		cmd.Type, cmd.Op = fsm.CmdCreate, createOp(op.Create)
	case *api.Request_Delete:
		cmd.Type, cmd.Op = fsm.CmdDelete, fsm.Op{Type: fsm.CmdDelete, Path: op.Delete.Path, Version: op.Delete.Version}
	case *api.Request_SetData:
		cmd.Type, cmd.Op = fsm.CmdSetData, fsm.Op{Type: fsm.CmdSetData, Path: op.SetData.Path,
			Data: nullable(op.SetData.Data, op.SetData.NullData), Version: op.SetData.Version}
	case *api.Request_SetAcl:
		cmd.Type, cmd.Op = fsm.CmdSetACL, fsm.Op{Type: fsm.CmdSetACL, Path: op.SetAcl.Path, ACL: api.ACLFromAPI(op.SetAcl.Acl), Version: op.SetAcl.Version}
	case *api.Request_Close:
		cmd.Type = fsm.CmdCloseSession
	case *api.Request_Multi:
		cmd.Type = fsm.CmdMulti
		cmd.Ops = make([]fsm.Op, 0, len(op.Multi.Ops))
		for _, mo := range op.Multi.Ops {
			switch o := mo.Op.(type) {
			case *api.MultiOp_Create:
				cmd.Ops = append(cmd.Ops, createOp(o.Create))
			case *api.MultiOp_Delete:
				cmd.Ops = append(cmd.Ops, fsm.Op{Type: fsm.CmdDelete, Path: o.Delete.Path, Version: o.Delete.Version})
			case *api.MultiOp_SetData:
				cmd.Ops = append(cmd.Ops, fsm.Op{Type: fsm.CmdSetData, Path: o.SetData.Path,
					Data: nullable(o.SetData.Data, o.SetData.NullData), Version: o.SetData.Version})
			case *api.MultiOp_Check:
				cmd.Ops = append(cmd.Ops, fsm.Op{Type: fsm.CmdCheck, Path: o.Check.Path, Version: o.Check.Version})
			default:
				cmd.Ops = append(cmd.Ops, fsm.Op{}) // applies as BadArguments
			}
		}
	default:
		return nil, false
	}
	return cmd, true
}

// read answers a read or watch request from a view taken under the apply
// lock, registering any watch and queueing the response before releasing
// it: the read either sees a change, and the change's event was queued
// before the response, or its watch fires for the change and the event is
// queued after the response (as ZooKeeper, whose reads never run beside an
// apply).
func (c *conn) read(sl *slot, req *api.Request, op string, start time.Time) {
	s := c.s
	ids := c.identities()
	s.fsm.mu.RLock()
	defer s.fsm.mu.RUnlock()
	v := s.fsm.fsm.View()
	r := c.readOn(v, req, ids)
	r.Zxid = int64(v.LastZxid())
	r.Xid = req.Xid
	c.answer(sl, r, op, start)
}

func (c *conn) readOn(v *fsm.View, req *api.Request, ids []fsm.Id) *api.Response {
	s := c.s
	switch op := req.Op.(type) {
	case *api.Request_Ping:
		return &api.Response{Result: &api.Response_Empty{Empty: &api.Empty{}}}
	case *api.Request_GetData:
		data, st, err := v.GetData(op.GetData.Path, ids)
		if op.GetData.Watch && err == nil {
			s.watches.AddData(c.id, op.GetData.Path)
		}
		if err != nil {
			return errResponse(err)
		}
		return &api.Response{Result: &api.Response_GetData{GetData: &api.GetDataResponse{Data: data, NullData: data == nil, Stat: api.StatToAPI(st)}}}
	case *api.Request_Exists:
		if strings.IndexByte(op.Exists.Path, 0) >= 0 {
			// ZooKeeper's exists refuses a NUL in the path before it
			// registers a watch.
			return &api.Response{Err: int32(fsm.BadArguments), ErrPath: op.Exists.Path}
		}
		st, err := v.Exists(op.Exists.Path)
		if op.Exists.Watch {
			// ZooKeeper: exists watches a missing node for its creation.
			s.watches.AddData(c.id, op.Exists.Path)
		}
		if err != nil {
			if fsm.CodeOf(err) == fsm.NoNode {
				return &api.Response{Err: int32(fsm.NoNode), Result: &api.Response_Stat{Stat: &api.StatResponse{}}}
			}
			return errResponse(err)
		}
		return &api.Response{Result: &api.Response_Stat{Stat: &api.StatResponse{Stat: api.StatToAPI(st)}}}
	case *api.Request_GetChildren:
		kids, st, err := v.GetChildren(op.GetChildren.Path, ids)
		if op.GetChildren.Watch && err == nil {
			s.watches.AddChild(c.id, op.GetChildren.Path)
		}
		if err != nil {
			return errResponse(err)
		}
		return &api.Response{Result: &api.Response_GetChildren{GetChildren: &api.GetChildrenResponse{Children: kids, Stat: api.StatToAPI(st)}}}
	case *api.Request_GetAcl:
		acl, st, err := v.GetACL(op.GetAcl.Path, ids)
		if err != nil {
			return errResponse(err)
		}
		return &api.Response{Result: &api.Response_GetAcl{GetAcl: &api.GetACLResponse{Acl: api.ACLToAPI(acl), Stat: api.StatToAPI(st)}}}
	case *api.Request_GetAllChildrenNumber:
		n, err := v.GetAllChildrenNumber(op.GetAllChildrenNumber.Path, ids)
		if err != nil {
			return errResponse(err)
		}
		return &api.Response{Result: &api.Response_Count{Count: &api.CountResponse{Count: int32(n)}}}
	case *api.Request_GetEphemerals:
		return &api.Response{Result: &api.Response_Paths{Paths: &api.PathsResponse{Paths: v.GetEphemerals(c.id, op.GetEphemerals.Prefix)}}}
	case *api.Request_MultiRead:
		return c.multiRead(v, op.MultiRead, ids)
	case *api.Request_AddWatch:
		if err := s.watches.AddWatch(c.id, op.AddWatch.Path, watch.AddWatchMode(op.AddWatch.Mode)); err != nil {
			return &api.Response{Err: int32(fsm.BadArguments)}
		}
		return &api.Response{Result: &api.Response_Empty{Empty: &api.Empty{}}}
	case *api.Request_RemoveWatches:
		if !s.watches.Remove(c.id, op.RemoveWatches.Path, watch.WatcherType(op.RemoveWatches.Type)) {
			return &api.Response{Err: int32(fsm.NoWatcher), ErrPath: op.RemoveWatches.Path}
		}
		return &api.Response{Result: &api.Response_Empty{Empty: &api.Empty{}}}
	case *api.Request_CheckWatches:
		if !s.watches.Contains(c.id, op.CheckWatches.Path, watch.WatcherType(op.CheckWatches.Type)) {
			return &api.Response{Err: int32(fsm.NoWatcher), ErrPath: op.CheckWatches.Path}
		}
		return &api.Response{Result: &api.Response_Empty{Empty: &api.Empty{}}}
	case *api.Request_Auth:
		return c.authenticate(op.Auth)
	case *api.Request_SetWatches:
		// Events for what changed since the client's zxid are queued
		// before this response, as ZooKeeper sends them.
		c.s.reattachLocked(c, v, op.SetWatches)
		return &api.Response{Result: &api.Response_Empty{Empty: &api.Empty{}}}
	case *api.Request_WhoAmI:
		info := &api.WhoAmIResponse{}
		for _, id := range ids {
			user := id.ID
			if id.Scheme == "digest" {
				user, _, _ = strings.Cut(id.ID, ":")
			}
			info.ClientInfo = append(info.ClientInfo, &api.ClientInfo{AuthScheme: id.Scheme, User: user})
		}
		return &api.Response{Result: &api.Response_WhoAmI{WhoAmI: info}}
	}
	return &api.Response{Err: int32(fsm.Unimplemented)}
}

func (c *conn) multiRead(v *fsm.View, m *api.MultiReadRequest, ids []fsm.Id) *api.Response {
	out := &api.MultiReadResponse{Results: make([]*api.MultiReadResult, len(m.Ops))}
	for i, op := range m.Ops {
		res := &api.MultiReadResult{}
		switch o := op.Op.(type) {
		case *api.MultiReadOp_GetData:
			data, st, err := v.GetData(o.GetData.Path, ids)
			res.Err, res.Data, res.NullData, res.Stat = int32(fsm.CodeOf(err)), data, data == nil && err == nil, api.StatToAPI(st)
		case *api.MultiReadOp_GetChildren:
			kids, st, err := v.GetChildren(o.GetChildren.Path, ids)
			res.Err, res.Children, res.Stat = int32(fsm.CodeOf(err)), kids, api.StatToAPI(st)
		default:
			res.Err = int32(fsm.Unimplemented)
		}
		out.Results[i] = res
	}
	return &api.Response{Result: &api.Response_MultiRead{MultiRead: out}}
}

// authenticate adds an identity to the session (ZooKeeper's addAuthInfo).
func (c *conn) authenticate(a *api.AuthRequest) *api.Response {
	switch a.Scheme {
	case "digest":
		id, err := fsm.ParseAuthDigest(string(a.Auth))
		if err != nil {
			return &api.Response{Err: int32(fsm.AuthFailed)}
		}
		c.addIdentity(id)
		return &api.Response{Result: &api.Response_Empty{Empty: &api.Empty{}}}
	}
	return &api.Response{Err: int32(fsm.AuthFailed)}
}

func sessionHex(id int64) string { return fmt.Sprintf("0x%x", id) }
