package zkfront

import (
	"fmt"
	"time"

	"coord/fsm"
	"coord/server/sessions"
	"coord/vocab"
	"coord/watch"
	"coord/zk"
)

// replyTag is what the writer needs to shape a request's jute reply beyond
// what the session layer answers; it travels as the request's tag and
// comes back with the reply.
type replyTag struct {
	op    zk.OpCode
	multi []zk.OpCode // the types of a multi's results
	// marshalAt is 1 + the index of a multi's first op that fails the
	// whole multi with MarshallingError if it is reached (multiOp); 0 if none.
	marshalAt int
	close     bool      // close the connection after this reply
	start     time.Time // when the request arrived (its latency, stats.go)
}

// opKinds is the kind each ZooKeeper op code becomes: the ZooKeeper column
// of the session layer's table (sessions.OpInfo.ZooKeeper). An op code
// absent here is refused (OpRefuse).
var opKinds = func() map[zk.OpCode]sessions.OpKind {
	byName := map[string]zk.OpCode{}
	for _, op := range zk.OpCodes() {
		byName[op.String()] = op
	}
	kinds := map[zk.OpCode]sessions.OpKind{}
	for _, k := range sessions.Kinds() {
		for _, name := range k.Info().ZooKeeper {
			op, ok := byName[name]
			if !ok {
				panic(fmt.Sprintf("zkfront: the session layer's table names ZooKeeper op code %q for %v, which zk does not define", name, k))
			}
			kinds[op] = k
		}
	}
	return kinds
}()

// translate maps a decoded jute request to the session layer's request,
// with the tag its reply will need: the kind from its op code (opKinds),
// the fields from its body. A request coord does not serve is refused with
// a code, in its place among the session's replies; sasl says whether the
// server has SASL users to serve a SASL request.
func translate(h zk.RequestHeader, body zk.Record, decodeErr error, arrived time.Time, sasl bool) (*sessions.Request, replyTag) {
	tag := replyTag{op: h.Type, start: arrived}
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
	req.Kind = opKinds[h.Type]
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
		req.Path, req.WatcherType = b.Path, vocab.WatcherType(b.Type)
	case *zk.RemoveWatchesRequest:
		req.Path, req.WatcherType = b.Path, vocab.WatcherType(b.Type)
	case *zk.AddWatchRequest:
		req.Path, req.WatchMode = b.Path, vocab.AddWatchMode(b.Mode)
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
		if !sasl {
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
