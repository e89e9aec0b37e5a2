package sessions

import (
	"coord/fsm"
	"errors"
	"fmt"
	"reflect"
)

// OpKind is what a request asks for. What each kind is, how the session
// layer runs it and which requests of each wire become it is said once, in
// the table below (ops); Handle, writeCommand and read-only mode read it,
// and so do the front ends (server/zkfront and the server's grpc.go),
// which take a request's kind from its ZooKeeper and gRPC columns.
type OpKind uint8

const (
	// OpRefuse is a request the front end refused or does not know: it is
	// answered with code alone, in its place among the session's replies.
	OpRefuse OpKind = iota
	OpPing
	OpClose
	OpCreate
	OpDelete
	OpSetData
	OpSetACL
	OpMulti
	OpGetData
	OpExists
	OpGetChildren
	OpGetACL
	OpSync
	OpAddWatch
	OpRemoveWatches
	OpCheckWatches
	OpAuth
	OpGetAllChildrenNumber
	OpGetEphemerals
	OpMultiRead
	OpSetWatches
	OpWhoAmI
	OpSASL
	OpReconfig
	opKindEnd
)

// Run is how Handle runs a kind of request.
type Run uint8

const (
	// RunAnswer: answered in its place, after the session's earlier
	// writes, under the apply lock with no wait for freshness
	// (Replica.Read): a ping, a refusal.
	RunAnswer Run = iota
	// RunRead: a read (or a watch call, or auth), after the session's
	// earlier writes, on a fresh view under the apply lock
	// (Replica.ReadFresh); its reply is queued before the lock is let go.
	RunRead
	// RunWrite: a write, the command Cmd submitted to the log at once (a
	// session's writes pipeline) and answered from inside apply.
	RunWrite
	// RunSync: after the session's earlier writes, waits until this
	// server has applied what the leader had committed; later reads wait
	// for it as for a write.
	RunSync
	// RunReconfig: the server's reconfig hook (Config.Reconfig), which
	// changes raft's membership; later reads wait for it as for a write.
	RunReconfig
)

// InReadOnly is what a read-only session (readonly.go) gets for a kind.
type InReadOnly uint8

const (
	// ROServed: served as on any session.
	ROServed InReadOnly = iota
	// RORefused: answered NotReadOnly, as ZooKeeper's
	// ReadOnlyRequestProcessor answers every request that would go through
	// the leader.
	RORefused
	// ROEndsLocal: a local session's close ends it on this server; the
	// close of a session of the log is refused with NotReadOnly.
	ROEndsLocal
)

// OpInfo is one row of the table of request kinds.
type OpInfo struct {
	// Name is ZooKeeper's name of the operation: the op label of the
	// request metrics, and the kind's String.
	Name string
	// Run says how Handle runs it. A kind is a write (IsWrite) if it is
	// RunWrite: then Cmd is the command it becomes (the request's Write,
	// or a multi's Writes, with the session's identities and connection);
	// otherwise Cmd is 0.
	Run Run
	Cmd fsm.CmdType
	// ReadOnly is what a read-only session gets for it.
	ReadOnly InReadOnly
	// ZooKeeper are the op codes (ZooDefs.OpCode names, as zk.OpCode's
	// String gives them) that the ZooKeeper front end turns into this
	// kind. Of the op codes ZooKeeper defines, createSession is the
	// connect handshake, notification and error appear only in replies;
	// every other one is listed once. The op codes listed for OpRefuse
	// are answered Unimplemented (and the connection closed), as ZooKeeper
	// answers a standalone check; so is sasl on a server with no SASL
	// users (server/zkfront).
	ZooKeeper []string
	// GRPC is the field of api.Request's op oneof that the gRPC front end
	// turns into this kind ("": none).
	GRPC string
}

// ops is the table of request kinds, indexed by kind. TestOpTable checks
// that every kind has its row and that the rows agree with themselves; the
// server's TestOpTableZooKeeper and TestOpTableGRPC, that the front ends
// do as the ZooKeeper and gRPC columns say (ROServed, the zero ReadOnly, is
// left out).
var ops = [opKindEnd]OpInfo{
	OpRefuse: {Name: "unknown", Run: RunAnswer, ZooKeeper: []string{"check", "deleteContainer"}},
	OpPing:   {Name: "ping", Run: RunAnswer, ZooKeeper: []string{"ping"}, GRPC: "ping"},

	OpClose:   {Name: "closeSession", Run: RunWrite, Cmd: fsm.CmdCloseSession, ReadOnly: ROEndsLocal, ZooKeeper: []string{"closeSession"}, GRPC: "close"},
	OpCreate:  {Name: "create", Run: RunWrite, Cmd: fsm.CmdCreate, ReadOnly: RORefused, ZooKeeper: []string{"create", "create2", "createContainer", "createTTL"}, GRPC: "create"},
	OpDelete:  {Name: "delete", Run: RunWrite, Cmd: fsm.CmdDelete, ReadOnly: RORefused, ZooKeeper: []string{"delete"}, GRPC: "delete"},
	OpSetData: {Name: "setData", Run: RunWrite, Cmd: fsm.CmdSetData, ReadOnly: RORefused, ZooKeeper: []string{"setData"}, GRPC: "set_data"},
	OpSetACL:  {Name: "setACL", Run: RunWrite, Cmd: fsm.CmdSetACL, ReadOnly: RORefused, ZooKeeper: []string{"setACL"}, GRPC: "set_acl"},
	OpMulti:   {Name: "multi", Run: RunWrite, Cmd: fsm.CmdMulti, ReadOnly: RORefused, ZooKeeper: []string{"multi"}, GRPC: "multi"},

	OpSync:     {Name: "sync", Run: RunSync, ReadOnly: RORefused, ZooKeeper: []string{"sync"}, GRPC: "sync"},
	OpReconfig: {Name: "reconfig", Run: RunReconfig, ReadOnly: RORefused, ZooKeeper: []string{"reconfig"}},

	OpGetData:              {Name: "getData", Run: RunRead, ZooKeeper: []string{"getData"}, GRPC: "get_data"},
	OpExists:               {Name: "exists", Run: RunRead, ZooKeeper: []string{"exists"}, GRPC: "exists"},
	OpGetChildren:          {Name: "getChildren", Run: RunRead, ZooKeeper: []string{"getChildren", "getChildren2"}, GRPC: "get_children"},
	OpGetACL:               {Name: "getACL", Run: RunRead, ZooKeeper: []string{"getACL"}, GRPC: "get_acl"},
	OpAddWatch:             {Name: "addWatch", Run: RunRead, ZooKeeper: []string{"addWatch"}, GRPC: "add_watch"},
	OpRemoveWatches:        {Name: "removeWatches", Run: RunRead, ZooKeeper: []string{"removeWatches"}, GRPC: "remove_watches"},
	OpCheckWatches:         {Name: "checkWatches", Run: RunRead, ZooKeeper: []string{"checkWatches"}, GRPC: "check_watches"},
	OpAuth:                 {Name: "auth", Run: RunRead, ZooKeeper: []string{"auth"}, GRPC: "auth"},
	OpGetAllChildrenNumber: {Name: "getAllChildrenNumber", Run: RunRead, ZooKeeper: []string{"getAllChildrenNumber"}, GRPC: "get_all_children_number"},
	OpGetEphemerals:        {Name: "getEphemerals", Run: RunRead, ZooKeeper: []string{"getEphemerals"}, GRPC: "get_ephemerals"},
	OpMultiRead:            {Name: "multiRead", Run: RunRead, ZooKeeper: []string{"multiRead"}, GRPC: "multi_read"},
	OpSetWatches:           {Name: "setWatches", Run: RunRead, ZooKeeper: []string{"setWatches", "setWatches2"}, GRPC: "set_watches"},
	OpWhoAmI:               {Name: "whoAmI", Run: RunRead, ZooKeeper: []string{"whoAmI"}, GRPC: "who_am_i"},
	OpSASL:                 {Name: "sasl", Run: RunRead, ZooKeeper: []string{"sasl"}},
}

// Kinds returns every kind, in order.
func Kinds() []OpKind {
	out := make([]OpKind, opKindEnd)
	for i := range out {
		out[i] = OpKind(i)
	}
	return out
}

// Info is k's row of the table; a kind past the table reads as OpRefuse's
// Run with the name "unknown".
func (k OpKind) Info() OpInfo {
	if k < opKindEnd {
		return ops[k]
	}
	return OpInfo{Name: "unknown"}
}

// IsWrite reports whether k is a write: a command for the log, answered
// from inside apply (RunWrite).
func (k OpKind) IsWrite() bool { return k.Info().Run == RunWrite }

func (k OpKind) String() string { return k.Info().Name }

// WriteMismatch says how r disagrees with the table, or nil: a front end
// gives a request a write exactly when its kind is one, of the row's
// command type (a multi its Writes, a close none). The front ends' tests
// hold every op code and gRPC request to it.
func (r *Request) WriteMismatch() error {
	info := r.Kind.Info()
	hasWrite, hasWrites := !reflect.ValueOf(r.Write).IsZero(), r.Writes != nil
	switch {
	case !r.Kind.IsWrite():
		if hasWrite || hasWrites {
			return fmt.Errorf("a %v request carries a write, but the table says %v is not a write", r.Kind, r.Kind)
		}
	case info.Cmd == fsm.CmdMulti:
		if !hasWrites || hasWrite {
			return fmt.Errorf("a multi carries Write %v and Writes %v, want Writes only", r.Write, r.Writes)
		}
	case info.Cmd == fsm.CmdCloseSession:
		if hasWrite || hasWrites {
			return errors.New("a close carries a write")
		}
	default:
		if hasWrites || r.Write.Type != info.Cmd {
			return fmt.Errorf("a %v request carries a write of type %v, the table says %v", r.Kind, r.Write.Type, info.Cmd)
		}
	}
	return nil
}
