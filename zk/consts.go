package zk

import (
	"errors"
	"slices"
	"strconv"

	"coord/vocab"
)

// OpCode is a request type (ZooDefs.OpCode), as sent in RequestHeader.Type.
type OpCode int32

// ZooKeeper 3.8/3.9 op codes (ZooDefs.OpCode).
const (
	OpNotification         OpCode = 0
	OpCreate               OpCode = 1
	OpDelete               OpCode = 2
	OpExists               OpCode = 3
	OpGetData              OpCode = 4
	OpSetData              OpCode = 5
	OpGetACL               OpCode = 6
	OpSetACL               OpCode = 7
	OpGetChildren          OpCode = 8
	OpSync                 OpCode = 9
	OpPing                 OpCode = 11
	OpGetChildren2         OpCode = 12
	OpCheck                OpCode = 13 // only inside multi; alone ZooKeeper answers Unimplemented
	OpMulti                OpCode = 14
	OpCreate2              OpCode = 15
	OpReconfig             OpCode = 16
	OpCheckWatches         OpCode = 17
	OpRemoveWatches        OpCode = 18
	OpCreateContainer      OpCode = 19
	OpDeleteContainer      OpCode = 20
	OpCreateTTL            OpCode = 21
	OpMultiRead            OpCode = 22
	OpAuth                 OpCode = 100
	OpSetWatches           OpCode = 101
	OpSASL                 OpCode = 102
	OpGetEphemerals        OpCode = 103
	OpGetAllChildrenNumber OpCode = 104
	OpSetWatches2          OpCode = 105
	OpAddWatch             OpCode = 106
	OpWhoAmI               OpCode = 107
	OpCreateSession        OpCode = -10
	OpCloseSession         OpCode = -11
	OpError                OpCode = -1 // a failed op's result inside a multi response
)

var opNames = map[OpCode]string{
	OpNotification: "notification", OpCreate: "create", OpDelete: "delete", OpExists: "exists",
	OpGetData: "getData", OpSetData: "setData", OpGetACL: "getACL", OpSetACL: "setACL",
	OpGetChildren: "getChildren", OpSync: "sync", OpPing: "ping", OpGetChildren2: "getChildren2",
	OpCheck: "check", OpMulti: "multi", OpCreate2: "create2", OpReconfig: "reconfig",
	OpCheckWatches: "checkWatches", OpRemoveWatches: "removeWatches",
	OpCreateContainer: "createContainer", OpDeleteContainer: "deleteContainer",
	OpCreateTTL: "createTTL", OpMultiRead: "multiRead", OpAuth: "auth", OpSetWatches: "setWatches",
	OpSASL: "sasl", OpGetEphemerals: "getEphemerals", OpGetAllChildrenNumber: "getAllChildrenNumber",
	OpSetWatches2: "setWatches2", OpAddWatch: "addWatch", OpWhoAmI: "whoAmI",
	OpCreateSession: "createSession", OpCloseSession: "closeSession", OpError: "error",
}

// OpCodes returns every op code ZooKeeper defines (those with a name), in
// numeric order. Which of them the server serves, and as what, is the
// session layer's table (server/sessions, ops.go), which names them as
// String does.
func OpCodes() []OpCode {
	out := make([]OpCode, 0, len(opNames))
	for op := range opNames {
		out = append(out, op)
	}
	slices.Sort(out)
	return out
}

// String returns ZooDefs' name for op, or "unknown N".
func (op OpCode) String() string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return "unknown " + strconv.Itoa(int(op))
}

// lastOps are the short names ZooKeeper's cons output shows as lop=
// (FinalRequestProcessor's lastOp).
var lastOps = map[OpCode]string{
	OpPing: "PING", OpCreateSession: "SESS", OpMulti: "MULT", OpMultiRead: "MLTR",
	OpCreate: "CREA", OpCreate2: "CREA", OpCreateTTL: "CREA", OpCreateContainer: "CREA",
	OpDelete: "DELE", OpDeleteContainer: "DELE", OpSetData: "SETD", OpReconfig: "RECO",
	OpSetACL: "SETA", OpCloseSession: "CLOS", OpSync: "SYNC", OpCheck: "CHEC",
	OpExists: "EXIS", OpGetData: "GETD", OpSetWatches: "SETW", OpSetWatches2: "STW2",
	OpAddWatch: "ADDW", OpGetACL: "GETA", OpGetChildren: "GETC", OpGetChildren2: "GETC",
	OpGetAllChildrenNumber: "GETACN", OpCheckWatches: "CHKW", OpRemoveWatches: "REMW",
	OpWhoAmI: "HOMI", OpGetEphemerals: "GETE",
}

// LastOpName returns the name ZooKeeper's cons output gives the last op of a
// connection ("GETD", "PING", ...), or "NA" as for a connection without one.
func LastOpName(op OpCode) string {
	if s, ok := lastOps[op]; ok {
		return s
	}
	return "NA"
}

// Special xids (ClientCnxn). Requests with these xids are not matched to a
// pending request by the Java client, except SetWatches, which is.
const (
	XidNotification int32 = -1 // watch events sent by the server
	XidPing         int32 = -2
	XidAuth         int32 = -4 // AuthPacket and its reply
	XidSetWatches   int32 = -8 // SetWatches/SetWatches2 sent on reconnect
)

// ProtocolVersion is the only protocol version ZooKeeper speaks (0).
const ProtocolVersion int32 = 0

// PasswordLen is the length of a session password ZooKeeper hands out.
const PasswordLen = 16

// KeeperState is the state field of a WatcherEvent (Watcher.Event.KeeperState):
// vocab.KeeperState, the session states coord's packages share.
type KeeperState = vocab.KeeperState

// ZooKeeper's KeeperState values (vocab's).
const (
	StateUnknown           = vocab.StateUnknown // deprecated
	StateDisconnected      = vocab.StateDisconnected
	StateNoSyncConnected   = vocab.StateNoSyncConnected // deprecated
	StateSyncConnected     = vocab.StateSyncConnected
	StateAuthFailed        = vocab.StateAuthFailed
	StateConnectedReadOnly = vocab.StateConnectedReadOnly
	StateSASLAuthenticated = vocab.StateSASLAuthenticated
	StateExpired           = vocab.StateExpired
	StateClosed            = vocab.StateClosed
)

// EventType is the type field of a WatcherEvent (Watcher.Event.EventType):
// vocab's znode event types plus the ones only the wire knows.
type EventType int32

// ZooKeeper's EventType values.
const (
	EventNone                   EventType = EventType(vocab.EventNone)
	EventNodeCreated            EventType = EventType(vocab.EventNodeCreated)
	EventNodeDeleted            EventType = EventType(vocab.EventNodeDeleted)
	EventNodeDataChanged        EventType = EventType(vocab.EventNodeDataChanged)
	EventNodeChildrenChanged    EventType = EventType(vocab.EventNodeChildrenChanged)
	EventDataWatchRemoved       EventType = 5
	EventChildWatchRemoved      EventType = 6
	EventPersistentWatchRemoved EventType = 7
)

func (t EventType) String() string {
	switch t {
	case EventNone:
		return "None"
	case EventDataWatchRemoved:
		return "DataWatchRemoved"
	case EventChildWatchRemoved:
		return "ChildWatchRemoved"
	case EventPersistentWatchRemoved:
		return "PersistentWatchRemoved"
	case EventNodeCreated, EventNodeDeleted, EventNodeDataChanged, EventNodeChildrenChanged:
		return vocab.EventType(t).String()
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// CodeOf maps an error to the code to put in a ReplyHeader: OK for nil, the
// vocab.Code carried by a *vocab.Error or vocab.Code, MarshallingError for a
// request body that did not decode (ErrMalformed), Unimplemented for
// ErrUnknownOp, and SystemError for anything else.
func CodeOf(err error) vocab.Code {
	switch {
	case err == nil:
		return vocab.OK
	case errors.Is(err, ErrMalformed):
		return vocab.MarshallingError
	case errors.Is(err, ErrUnknownOp):
		return vocab.Unimplemented
	}
	return vocab.CodeOf(err)
}
