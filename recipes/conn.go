package recipes

import (
	"context"
	"errors"
	"sync"

	"coord/vocab"
)

// Conn is all a recipe needs of a session with a coordination service:
// ZooKeeper's create, delete, exists, getData, setData, getChildren and
// multi, one-shot watches and persistent(-recursive) watches as channels,
// and the session's state. Package coordconn adapts coord's Go client to
// it, package zkconn adapts github.com/go-zookeeper/zk, so every recipe runs
// unchanged on coord and on Apache ZooKeeper.
//
// Errors from the service are *vocab.Error values (errors.Is(err,
// vocab.NoNode) and so on); vocab.ConnectionLoss means the outcome of the
// call is unknown (the session may still be alive), vocab.SessionExpired
// that the session is gone for good, ErrClosed that the Conn was closed. A
// call whose context ends returns an error wrapping ctx.Err().
//
// A one-shot watch channel (ExistsW, GetW, ChildrenW) receives exactly one
// event and is closed: the node event, or an EventNotWatching when the
// session ends. One-shot watches survive a change of server: the adapters
// re-register them. A Conn is safe for concurrent use.
type Conn interface {
	// Create makes a znode and returns its path (with the sequence suffix
	// for sequential modes).
	Create(ctx context.Context, path string, data []byte, mode vocab.CreateMode, acl []vocab.ACL) (string, error)
	// Delete removes a znode if its version matches (-1 matches any).
	Delete(ctx context.Context, path string, version int32) error
	// Exists reports whether a znode exists, with its Stat if it does.
	Exists(ctx context.Context, path string) (bool, vocab.Stat, error)
	// ExistsW is Exists with a one-shot watch: NodeCreated if the node is
	// missing, else NodeDataChanged or NodeDeleted.
	ExistsW(ctx context.Context, path string) (bool, vocab.Stat, <-chan Event, error)
	// Get returns a znode's data and Stat.
	Get(ctx context.Context, path string) ([]byte, vocab.Stat, error)
	// GetW is Get with a one-shot data watch (NodeDataChanged, NodeDeleted).
	GetW(ctx context.Context, path string) ([]byte, vocab.Stat, <-chan Event, error)
	// Set replaces a znode's data if its version matches (-1 matches any).
	Set(ctx context.Context, path string, data []byte, version int32) (vocab.Stat, error)
	// Children returns the names of a znode's children, in no particular
	// order.
	Children(ctx context.Context, path string) ([]string, vocab.Stat, error)
	// ChildrenW is Children with a one-shot child watch
	// (NodeChildrenChanged, NodeDeleted).
	ChildrenW(ctx context.Context, path string) ([]string, vocab.Stat, <-chan Event, error)
	// Multi applies ops atomically, all or none. On failure the error is
	// the *vocab.Error of the first operation that failed.
	Multi(ctx context.Context, ops ...Op) ([]OpResult, error)
	// AddWatch sets a persistent watch on path (recursive: on path and
	// every descendant, without NodeChildrenChanged), delivering events
	// until RemoveWatch or the end of the session, when the channel gets
	// EventNotWatching and closes. Events that happen while the session is
	// suspended are not replayed: a user re-reads on StateReconnected.
	// A Conn that cannot (a client or server without ZooKeeper 3.6's
	// addWatch) returns ErrUnsupported; recipes then fall back to one-shot
	// watches.
	AddWatch(ctx context.Context, path string, recursive bool) (<-chan Event, error)
	// RemoveWatch removes the session's persistent watches of that kind on
	// path; their channels get EventNotWatching and close.
	RemoveWatch(ctx context.Context, path string, recursive bool) error
	// SessionID is the id of the session (the EphemeralOwner of its
	// ephemeral znodes).
	SessionID() int64
	// State reports the session's state and a channel that is closed at
	// the next change of state.
	State() (SessionState, <-chan struct{})
}

// Event is a watch notification.
type Event struct {
	// Type is a znode event (vocab.EventNodeCreated ...) or
	// EventNotWatching.
	Type vocab.EventType
	Path string
	// Err says why, on EventNotWatching.
	Err error
}

// EventNotWatching is the last event of a watch that will not fire: the
// session ended or the watch was removed.
const EventNotWatching vocab.EventType = -2

// SessionState is the state of a Conn's session as the recipes see it
// (Curator's connection states).
type SessionState int

const (
	// StateConnected: the session is established and attached to a server.
	StateConnected SessionState = iota + 1
	// StateSuspended: the connection to the server is lost. The session may
	// still be alive (its ephemerals stay) or may expire; a recipe cannot
	// tell until it reconnects. A lock holder should stop touching what the
	// lock guards, or guard it with the fencing token.
	StateSuspended
	// StateReconnected: the session is attached again after a suspension;
	// its ephemerals and watches are intact.
	StateReconnected
	// StateExpired: the session is gone and its ephemerals deleted (or about
	// to be). The Conn is finished; a new session needs a new Conn.
	StateExpired
	// StateClosed: Close ended the session. The Conn is finished.
	StateClosed
)

func (s SessionState) String() string {
	switch s {
	case StateConnected:
		return "Connected"
	case StateSuspended:
		return "Suspended"
	case StateReconnected:
		return "Reconnected"
	case StateExpired:
		return "Expired"
	case StateClosed:
		return "Closed"
	}
	return "SessionState(?)"
}

// Live reports whether a Conn in state s can still be used (it may be
// suspended).
func (s SessionState) Live() bool { return s != StateExpired && s != StateClosed }

// SessionTracker holds a session's state for an adapter and tells waiters
// of every change: State returns a channel closed at the next change, so any
// number of recipes can follow one session without a goroutine each.
// The terminal states (Expired, Closed) are final.
type SessionTracker struct {
	mu      sync.Mutex
	state   SessionState
	changed chan struct{}
}

// NewSessionTracker returns a tracker in state StateConnected.
func NewSessionTracker() *SessionTracker {
	return &SessionTracker{state: StateConnected, changed: make(chan struct{})}
}

// State returns the state and a channel closed at the next change.
func (t *SessionTracker) State() (SessionState, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state, t.changed
}

// Set moves to state s (ignored once terminal, and when s is the current
// state) and wakes the waiters. It reports whether the state changed.
func (t *SessionTracker) Set(s SessionState) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.state.Live() || t.state == s {
		return false
	}
	t.state = s
	close(t.changed)
	t.changed = make(chan struct{})
	return true
}

// Op is one operation of a Multi: CreateOp, DeleteOp, SetDataOp or CheckOp.
type Op interface{ isOp() }

// CreateOp creates a znode, as Conn.Create.
type CreateOp struct {
	Path string
	Data []byte
	Mode vocab.CreateMode
	ACL  []vocab.ACL
}

// DeleteOp deletes a znode, as Conn.Delete.
type DeleteOp struct {
	Path    string
	Version int32
}

// SetDataOp sets a znode's data, as Conn.Set.
type SetDataOp struct {
	Path    string
	Data    []byte
	Version int32
}

// CheckOp fails the Multi unless the znode exists with this version (-1:
// any version, so it checks existence).
type CheckOp struct {
	Path    string
	Version int32
}

func (CreateOp) isOp()  {}
func (DeleteOp) isOp()  {}
func (SetDataOp) isOp() {}
func (CheckOp) isOp()   {}

// OpResult is the outcome of one operation of a successful Multi: the
// created path for a CreateOp, the new Stat for a SetDataOp (where the
// Conn reports it).
type OpResult struct {
	Path string
	Stat vocab.Stat
}

// AnyVersion matches any version in Delete, Set and CheckOp.
const AnyVersion int32 = -1

// Errors of the recipes. Errors from the service are *vocab.Error values.
var (
	// ErrClosed: the Conn, or the recipe, was closed.
	ErrClosed = errors.New("recipes: closed")
	// ErrUnsupported: the Conn cannot do this (Conn.AddWatch without
	// persistent watches).
	ErrUnsupported = errors.New("recipes: not supported by this connection")
	// ErrSessionLost: the session expired or was closed while the recipe
	// needed it; its ephemerals (lock nodes, memberships, claims) are gone.
	ErrSessionLost = errors.New("recipes: session lost")
	// ErrLockNotHeld: Unlock (or Release) of a lock this holder does not
	// hold.
	ErrLockNotHeld = errors.New("recipes: lock not held")
	// ErrNodeVanished: a recipe's own node was deleted by someone else
	// while the session lived (an operator, or a revocation).
	ErrNodeVanished = errors.New("recipes: own node deleted by someone else")
	// ErrEmpty: a queue had no item to take.
	ErrEmpty = errors.New("recipes: queue empty")
	// ErrBarrierBroken: a double barrier's participant left or died before
	// the barrier filled.
	ErrBarrierBroken = errors.New("recipes: barrier broken")
	// ErrAborted: a two-phase commit transaction was aborted.
	ErrAborted = errors.New("recipes: transaction aborted")
	// ErrNotLeader: an operation that needs leadership was called without
	// it.
	ErrNotLeader = errors.New("recipes: not the leader")
)
