package sessions

import (
	"time"

	"coord/fsm"
	"coord/vocab"
	"coord/watch"
)

// The session layer's own messages: what a front end hands to Conn.Handle
// (a request), what the session's ordered outbound stream carries back (a
// reply per request, and events), and what creates or re-attaches a session
// (ConnectRequest, ConnectReply). They are plain structs in the shared
// vocabulary; each front end is a codec between them and its wire (the
// server's grpc.go: protobuf, server/zkfront: jute), so neither wire's
// records pass through the other.
//
// Data follows ZooKeeper's rule everywhere in them: nil is null data, which
// ZooKeeper keeps apart from empty data (api.DataFromAPI reads protobuf's
// pair of bytes and null flag into that form).

// Request is one client Request as the session layer takes it. Which
// fields count depends on kind.
type Request struct {
	Kind OpKind
	Xid  int64
	// Tag is the front end's own note on the request, returned unchanged
	// with its reply: the ZooKeeper front end keeps there what shapes the
	// jute reply (the op code, a multi's op types, closing after it).
	Tag any

	// Write is the write of create, delete, setData and setACL as the state
	// machine takes it (its Type matching kind).
	Write fsm.Op
	// Writes are a multi's writes; one the front end could not map is the
	// zero Op, which applies as BadArguments.
	Writes []fsm.Op

	Path  string // the node of a read, sync or watch call; getEphemerals' prefix
	Watch bool   // getData, exists, getChildren: leave a watch

	WatcherType vocab.WatcherType  // removeWatches, checkWatches
	WatchMode   vocab.AddWatchMode // addWatch
	Reads       []ReadOp           // multiRead
	Scheme      string             // auth
	Auth        []byte             // auth
	Watches     *WatchSet          // setWatches
	Code        vocab.Code         // OpRefuse: the code to answer with
	Reconfig    *ReconfigArgs      // reconfig
}

// ReconfigArgs are ZooKeeper's reconfig arguments: incremental (Joining,
// Leaving) or a whole new membership (NewMembers), each as ZooKeeper's
// client sends them ("" for none), and the configuration version the
// change is based on (FromConfig, -1: any).
type ReconfigArgs struct {
	Joining, Leaving, NewMembers string
	FromConfig                   int64
}

// ReadOp is one read of a multiRead: kind OpGetData or OpGetChildren (any
// other answers Unimplemented).
type ReadOp struct {
	Kind OpKind
	Path string
}

// WatchSet is what a re-attaching client re-registers: its watches and the
// last zxid it saw (ZooKeeper's setWatches).
type WatchSet struct {
	RelativeZxid int64
	Watches      watch.WatchSet
}

// Body says what a reply carries besides its header.
type Body uint8

const (
	BodyNone      Body = iota // the header only (most errors)
	BodyEmpty                 // an empty result: ping, delete, close, watch calls, auth
	BodyCreate                // create: path and stat
	BodyStat                  // setData, setACL, exists: stat, none with exists' NoNode
	BodyData                  // getData: data and stat
	BodyChildren              // getChildren: children and stat
	BodyACL                   // getACL: acl and stat
	BodyMulti                 // multi: multi, one result per op (also when it failed)
	BodyMultiRead             // multiRead: reads, one result per op
	BodySync                  // sync: path
	BodyCount                 // getAllChildrenNumber: count
	BodyPaths                 // getEphemerals: the paths, in children
	BodyWhoAmI                // whoAmI: clients
	BodySASL                  // sasl: the server's token, in Data
)

// Reply is the session layer's answer to one request; Conn.answer copies
// the request's kind, xid and tag into it.
type Reply struct {
	Kind    OpKind
	Xid     int64
	Tag     any
	Zxid    int64      // the zxid the answer reflects: this server's last applied, or the write's
	Err     vocab.Code // ZooKeeper's result code
	ErrPath string     // the node an error is about, when known
	Body    Body

	Path     string         // create: the created node; sync: the path
	Stat     vocab.Stat     // create, setData, setACL, exists, getData, getChildren, getACL
	Data     []byte         // getData; nil is null data
	Owner    int64          // getData: a container's or TTL node's stored owner (fsm.View.GetDataKind)
	Children []string       // getChildren; getEphemerals' paths
	ACL      []vocab.ACL    // getACL
	Count    int32          // getAllChildrenNumber
	Multi    []fsm.OpResult // multi
	Reads    []ReadResult   // multiRead
	Clients  []ClientInfo   // whoAmI

	// A write's timing (replica.StageReply, StageTotal): when the session
	// layer took it and when it applied here; zero for other replies.
	start, applied time.Time
}

// ReadResult is one result of a multiRead.
type ReadResult struct {
	Kind     OpKind // the read's kind: OpGetData, OpGetChildren, or another when unknown
	Err      vocab.Code
	Data     []byte // OpGetData; nil is null data
	Stat     vocab.Stat
	Children []string // OpGetChildren
}

// ClientInfo is one identity of the session as whoAmI reports it.
type ClientInfo struct {
	Scheme string
	User   string
}

// Event is a notification to the session: a watch that fired, or (type
// vocab.EventNone) a change of the session's state.
type Event struct {
	Type  vocab.EventType
	State vocab.KeeperState
	Path  string
	Zxid  int64 // the change's zxid, or watch.NoZxid
}

// watchEvent is the notification of a fired watch.
func watchEvent(ev watch.Event) *Event {
	return &Event{Type: ev.Type, State: vocab.StateSyncConnected, Path: ev.Path, Zxid: ev.Zxid}
}

// Message is what a session's outbound stream carries: a *reply or an
// *event.
type Message interface {
	// size estimates the message's bytes for the outbox's bound on
	// unsent bytes (Config.MaxQueuedBytes) without encoding it.
	size() int
}

// messageOverhead is size's allowance for what every message has besides
// its variable-length parts: a header and a Stat on the wire, and the
// structures that hold them here.
const messageOverhead = 96

func (r *Reply) size() int {
	n := messageOverhead + len(r.ErrPath) + len(r.Path) + len(r.Data) + stringsSize(r.Children)
	for _, a := range r.ACL {
		n += 16 + len(a.ID.Scheme) + len(a.ID.ID)
	}
	for i := range r.Multi {
		n += messageOverhead + len(r.Multi[i].Path)
	}
	for i := range r.Reads {
		n += messageOverhead + len(r.Reads[i].Data) + stringsSize(r.Reads[i].Children)
	}
	for _, c := range r.Clients {
		n += 8 + len(c.Scheme) + len(c.User)
	}
	return n
}

func (ev *Event) size() int { return messageOverhead + len(ev.Path) }

func stringsSize(ss []string) int {
	n := 0
	for _, s := range ss {
		n += 4 + len(s)
	}
	return n
}

// ConnectRequest asks to create a session (sessionID 0) or re-attach one.
type ConnectRequest struct {
	SessionID int64
	Password  []byte
	TimeoutMs int32      // the timeout the client asks for
	LastZxid  int64      // the last zxid the client has seen
	Watches   *WatchSet  // watches to re-register on re-attach
	Auth      []vocab.Id // identities the client authenticates with
	// ReadOnly: the client accepts a read-only session (ZooKeeper's
	// canBeReadOnly) if this server is cut off from the quorum.
	ReadOnly bool
}

// ConnectReply is the session a ConnectRequest got.
type ConnectReply struct {
	SessionID int64
	Password  []byte
	TimeoutMs int32 // negotiated
	Zxid      int64 // this server's last applied zxid
	ServerID  string
	ReadOnly  bool // a read-only session: reads only, until the server has a quorum again
}
