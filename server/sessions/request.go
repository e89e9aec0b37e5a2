package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"coord/fsm"
	"coord/server/replica"
	"coord/vocab"
	"coord/watch"
)

// This file is the one request path of a session: both front ends turn
// their requests into a request (message.go) for Conn.Handle, and the
// session's replies and events come back to them through its outbox.

// Handle runs one request of the session, as its kind's row of the table
// says (ops.go). Writes are submitted at once (so a session's writes
// pipeline) and answered when applied here; reads, syncs and watch calls
// first wait for the session's earlier writes, so the session always reads
// its own writes, and keep request order. A request the front end refused
// takes its place in that order like a read.
func (c *Conn) Handle(req *Request) {
	start := time.Now()
	if c.readOnly && c.readOnlyRefusal(req, start) {
		return
	}
	info := req.Kind.Info()
	switch info.Run {
	case RunWrite:
		c.write(req, c.writeCommand(req, info.Cmd), start)
		return
	case RunSync:
		c.sync(req, start)
		return
	case RunReconfig:
		c.reconfig(req, start)
		return
	}
	c.waitWrites()
	sl := c.out.reserve()
	if sl == nil {
		return
	}
	c.read(sl, req, info.Run, start)
}

// answer fills a response slot with r, the answer to req, and counts the
// request.
func (c *Conn) answer(sl *slot, req *Request, r *Reply, start time.Time) {
	r.Kind, r.Xid, r.Tag = req.Kind, req.Xid, req.Tag
	// Count first: once the slot is filled the client may already have
	// the answer (and read the metrics).
	c.l.cfg.Metrics.Request(req.Kind.String(), r.Err, start)
	c.out.fill(sl, r)
}

func errReply(err error) *Reply {
	r := &Reply{Err: vocab.CodeOf(err)}
	var fe *vocab.Error
	if errors.As(err, &fe) {
		r.ErrPath = fe.Path
	}
	return r
}

// write submits cmd and answers from inside apply.
func (c *Conn) write(req *Request, cmd *fsm.Command, start time.Time) {
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
		c.answer(sl, req, &Reply{Err: vocab.ConnectionLoss, Zxid: int64(c.l.rep.LastZxid())}, start)
		return
	}
	if res, refused := fsm.RefuseOversize(cmd, c.l.cfg.MaxDataBytes); refused {
		// Refused before the log: nothing changed, and the connection stays.
		res.Zxid = c.l.rep.LastZxid()
		c.answer(sl, req, writeReply(cmd, res), start)
		return
	}
	c.beginWrite()
	early := plantedAckEarly != nil && plantedAckEarly(cmd)
	if early {
		// A planted bug (jepsenplanted builds only): answered before the
		// entry commits, as if it had succeeded.
		c.answer(sl, req, &Reply{Body: BodyStat, Zxid: int64(c.l.rep.LastZxid()), Stat: vocab.Stat{Version: cmd.Op.Version + 1}}, start)
	}
	c.l.cfg.Metrics.ObserveStage(replica.StageSession, time.Since(start))
	c.l.rep.Submit(cmd, func(ar replica.Result) {
		defer c.endWrite()
		if early {
			return
		}
		if errors.Is(ar.Err, replica.ErrRefused) {
			// Refused before reaching the log: nothing changed, and the
			// connection stays.
			c.answer(sl, req, &Reply{Err: vocab.SystemError, Zxid: int64(c.l.rep.LastZxid())}, start)
			return
		}
		c.auditWrite(cmd, ar.Res, ar.Err)
		var r *Reply
		if ar.Err != nil {
			c.mu.Lock()
			c.failed = true
			c.mu.Unlock()
			// The entry's fate is unknown (lost leader, server stopping):
			// answer ConnectionLoss and drop the connection so the client
			// re-attaches and finds out, as with ZooKeeper.
			r = &Reply{Err: vocab.ConnectionLoss, Zxid: int64(c.l.rep.LastZxid())}
		} else {
			r = writeReply(cmd, ar.Res)
			r.start, r.applied = start, time.Now()
		}
		c.answer(sl, req, r, start)
		if ar.Err != nil {
			c.l.log.Info("write failed; closing client connection", "session", sessionHex(c.id), "err", ar.Err)
			go c.Shut(ar.Err)
		} else if cmd.Type == fsm.CmdCloseSession {
			go c.Shut(nil)
		}
	})
}

// plantedAckEarly is nil except in builds with the jepsenplanted tag
// (planted_jepsen.go), where it picks the writes to acknowledge before they
// commit: a known bug for jepsen/'s checkers to find.
var plantedAckEarly func(cmd *fsm.Command) bool

// writeReply is the reply to a write that res answers.
func writeReply(cmd *fsm.Command, res fsm.Result) *Reply {
	r := errReply(res.Err)
	r.Zxid = int64(res.Zxid)
	switch cmd.Type {
	case fsm.CmdMulti:
		if res.Err != nil && res.Multi == nil {
			return r // the session was gone: no per-op results
		}
		r.Body, r.Multi = BodyMulti, res.Multi
	case fsm.CmdCreate:
		if res.Err == nil {
			r.Body, r.Path, r.Stat = BodyCreate, res.Path, res.Stat
		}
	case fsm.CmdSetData, fsm.CmdSetACL:
		if res.Err == nil {
			r.Body, r.Stat = BodyStat, res.Stat
		}
	default:
		r.Body = BodyEmpty
	}
	return r
}

// sync answers once this server has applied everything the leader had
// committed when the sync arrived.
func (c *Conn) sync(req *Request, start time.Time) {
	c.waitWrites()
	sl := c.out.reserve()
	if sl == nil {
		return
	}
	c.beginWrite() // later reads wait for the sync, as they would for a write
	go func() {
		defer c.endWrite()
		ctx, cancel := context.WithTimeout(context.Background(), 2*c.l.rep.LeaderWait())
		defer cancel()
		r := &Reply{Body: BodySync, Path: req.Path}
		idx, err := c.l.rep.SyncIndex(ctx)
		if err == nil {
			err = c.l.rep.WaitApplied(ctx, idx)
		}
		if err != nil {
			c.l.log.Info("sync failed; answering ConnectionLoss", "session", sessionHex(c.id), "err", err)
			r = &Reply{Err: vocab.ConnectionLoss}
		}
		// Answer under the apply lock, as a read: events of later applies
		// follow the response.
		c.l.rep.Read(func(v *fsm.View) {
			r.Zxid = int64(v.LastZxid())
			c.answer(sl, req, r, start)
		})
	}()
}

// reconfig runs a reconfig through the server's hook (it changes raft's
// membership and waits for /zookeeper/config to show it). Later reads
// wait for it, as for a write.
func (c *Conn) reconfig(req *Request, start time.Time) {
	c.waitWrites()
	sl := c.out.reserve()
	if sl == nil {
		return
	}
	hook := c.l.cfg.Reconfig
	if hook == nil || req.Reconfig == nil {
		c.answer(sl, req, &Reply{Err: vocab.ReconfigDisabled, Zxid: int64(c.l.rep.LastZxid())}, start)
		return
	}
	c.beginWrite()
	go func() {
		defer c.endWrite()
		ctx, cancel := context.WithTimeout(context.Background(), 8*c.l.rep.LeaderWait())
		defer cancel()
		r := hook(ctx, c.identities(), req.Reconfig)
		c.l.rep.Read(func(v *fsm.View) {
			r.Zxid = int64(v.LastZxid())
			c.answer(sl, req, r, start)
		})
	}()
}

// writeCommand is the command of type typ (the table's Cmd) that a write
// request becomes.
func (c *Conn) writeCommand(req *Request, typ fsm.CmdType) *fsm.Command {
	cmd := &fsm.Command{Type: typ, Session: c.id, Auth: c.identities(), Owner: c.owner}
	switch typ {
	case fsm.CmdCloseSession:
	case fsm.CmdMulti:
		cmd.Ops = req.Writes
	default:
		cmd.Op = req.Write
	}
	return cmd
}

// read answers a read or watch request from a view taken under the apply
// lock, registering any watch and queueing the response before releasing
// it: the read either sees a change, and the change's event was queued
// before the response, or its watch fires for the change and the event is
// queued after the response (as ZooKeeper, whose reads never run beside an
// apply).
func (c *Conn) read(sl *slot, req *Request, run Run, start time.Time) {
	l := c.l
	ids := c.identities()
	read := l.rep.ReadFresh
	if run == RunAnswer {
		read = l.rep.Read
	}
	read(func(v *fsm.View) {
		r := c.readOn(v, req, ids)
		r.Zxid = int64(v.LastZxid())
		c.answer(sl, req, r, start)
	})
}

func (c *Conn) readOn(v *fsm.View, req *Request, ids []vocab.Id) *Reply {
	l := c.l
	switch req.Kind {
	case OpRefuse:
		return &Reply{Err: req.Code}
	case OpPing:
		return &Reply{Body: BodyEmpty}
	case OpGetData:
		data, st, kindOwner, err := v.GetDataKind(req.Path, ids)
		if req.Watch && err == nil {
			if r := c.watchReply("getData", req.Path, l.watches.AddData(c.id, req.Path)); r != nil {
				return r
			}
		}
		if err != nil {
			return errReply(err)
		}
		return &Reply{Body: BodyData, Data: data, Stat: st, Owner: kindOwner}
	case OpExists:
		if strings.IndexByte(req.Path, 0) >= 0 {
			// ZooKeeper's exists refuses a NUL in the path before it
			// registers a watch.
			return &Reply{Err: vocab.BadArguments, ErrPath: req.Path}
		}
		st, err := v.Exists(req.Path)
		if req.Watch {
			// ZooKeeper: exists watches a missing node for its creation.
			if r := c.watchReply("exists", req.Path, l.watches.AddData(c.id, req.Path)); r != nil {
				return r
			}
		}
		if err != nil {
			if vocab.CodeOf(err) == vocab.NoNode {
				return &Reply{Err: vocab.NoNode, Body: BodyStat}
			}
			return errReply(err)
		}
		return &Reply{Body: BodyStat, Stat: st}
	case OpGetChildren:
		kids, st, err := v.GetChildren(req.Path, ids)
		if req.Watch && err == nil {
			if r := c.watchReply("getChildren", req.Path, l.watches.AddChild(c.id, req.Path)); r != nil {
				return r
			}
		}
		if err != nil {
			return errReply(err)
		}
		return &Reply{Body: BodyChildren, Children: kids, Stat: st}
	case OpGetACL:
		acl, st, err := v.GetACL(req.Path, ids)
		if err != nil {
			return errReply(err)
		}
		return &Reply{Body: BodyACL, ACL: acl, Stat: st}
	case OpGetAllChildrenNumber:
		n, err := v.GetAllChildrenNumber(req.Path, ids)
		if err != nil {
			return errReply(err)
		}
		return &Reply{Body: BodyCount, Count: int32(n)}
	case OpGetEphemerals:
		return &Reply{Body: BodyPaths, Children: v.GetEphemerals(c.id, req.Path)}
	case OpMultiRead:
		return c.multiRead(v, req.Reads, ids)
	case OpAddWatch:
		if err := l.watches.AddWatch(c.id, req.Path, req.WatchMode); err != nil {
			if r := c.watchReply("addWatch", req.Path, err); r.Err == vocab.QuotaExceeded {
				return r
			}
			return &Reply{Err: vocab.BadArguments}
		}
		return &Reply{Body: BodyEmpty}
	case OpRemoveWatches:
		if !l.watches.Remove(c.id, req.Path, req.WatcherType) {
			return &Reply{Err: vocab.NoWatcher, ErrPath: req.Path}
		}
		return &Reply{Body: BodyEmpty}
	case OpCheckWatches:
		if !l.watches.Contains(c.id, req.Path, req.WatcherType) {
			return &Reply{Err: vocab.NoWatcher, ErrPath: req.Path}
		}
		return &Reply{Body: BodyEmpty}
	case OpAuth:
		return c.authenticate(req.Scheme, req.Auth)
	case OpSASL:
		return c.sasl(req.Auth)
	case OpSetWatches:
		// Events for what changed since the client's zxid are queued
		// before this response, as ZooKeeper sends them.
		// Watches past MaxWatchesPerSession are not registered: the
		// reply says so (QuotaExceeded) after the events of those that
		// were. go-zookeeper logs it; the Java client ignores it.
		if errors.Is(c.l.reattachLocked(c, v, req.Watches), watch.ErrTooManyWatches) {
			return &Reply{Err: vocab.QuotaExceeded}
		}
		return &Reply{Body: BodyEmpty}
	case OpWhoAmI:
		r := &Reply{Body: BodyWhoAmI}
		for _, id := range whoAmIOrder(ids) {
			user := id.ID
			if id.Scheme == "digest" {
				user, _, _ = strings.Cut(id.ID, ":")
			}
			r.Clients = append(r.Clients, ClientInfo{Scheme: id.Scheme, User: user})
		}
		return r
	}
	return &Reply{Err: vocab.Unimplemented}
}

func (c *Conn) multiRead(v *fsm.View, reads []ReadOp, ids []vocab.Id) *Reply {
	out := make([]ReadResult, len(reads))
	for i, op := range reads {
		res := ReadResult{Kind: op.Kind}
		switch op.Kind {
		case OpGetData:
			data, st, err := v.GetData(op.Path, ids)
			res.Err, res.Data, res.Stat = vocab.CodeOf(err), data, st
		case OpGetChildren:
			kids, st, err := v.GetChildren(op.Path, ids)
			res.Err, res.Children, res.Stat = vocab.CodeOf(err), kids, st
		default:
			res.Err = vocab.Unimplemented
		}
		out[i] = res
	}
	return &Reply{Body: BodyMultiRead, Reads: out}
}

// authenticate adds an identity to the session (ZooKeeper's addAuthInfo).
func (c *Conn) authenticate(scheme string, auth []byte) *Reply {
	switch scheme {
	case "digest":
		id, err := fsm.ParseAuthDigest(string(auth))
		if err != nil {
			c.auditAuth(scheme, false)
			return &Reply{Err: vocab.AuthFailed}
		}
		for _, id := range c.l.digestIdentities(id) {
			c.addIdentity(id)
		}
		c.auditAuth(scheme, true)
		return &Reply{Body: BodyEmpty}
	}
	return &Reply{Err: vocab.AuthFailed}
}

func sessionHex(id int64) string { return fmt.Sprintf("0x%x", id) }
