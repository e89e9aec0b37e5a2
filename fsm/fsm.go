package fsm

import (
	"sync"

	"coord/vocab"
	"coord/zxid"
)

// FSM is the replicated state machine: the znode tree, the session table
// and the zxid clock, changed only by Apply and Restore. It is safe for one
// applying goroutine and any number of readers: readers take a View, an
// immutable state that existed between two commands.
type FSM struct {
	mu    sync.Mutex
	s     state
	gen   uint64 // generation the writer owns; views hold older ones
	dirty bool   // a command ran since view was taken
	view  *View
	acls  *aclTable
}

// New returns a state machine holding what a fresh ZooKeeper holds: the root,
// /zookeeper, /zookeeper/quota and /zookeeper/config. It takes no
// configuration: apply depends only on the log and the snapshot, so no
// server-local setting may change a result (limits such as the largest data
// are checked before the log; see RefuseOversize).
func New() *FSM {
	f := &FSM{gen: 1, acls: newACLTable(), dirty: true}
	f.s = newState(f.gen, f.acls)
	return f
}

// Result is what a committed command did. Err is nil or an *Error; a failed
// command changed nothing but still consumed its zxid, as in ZooKeeper.
type Result struct {
	Zxid      zxid.Zxid
	Err       error
	Path      string     // create: the created path (with its sequence suffix)
	Stat      vocab.Stat // create, setData, setACL: the node's new Stat
	SessionID int64      // createSession: the new session's id
	Multi     []OpResult // multi: one result per op
}

// OpResult is one op's outcome inside a multi. When the multi failed, the ops
// before the failing one report OK, the failing one its error and the ones
// after it RuntimeInconsistency, as ZooKeeper reports them.
type OpResult struct {
	Type CmdType
	Code vocab.Code
	Path string
	Stat vocab.Stat
}

// Apply applies one committed command from raft term term, returning its
// result and the watch triggers it fired, in order. It is deterministic: the
// same commands with the same terms give the same results and state on every
// server.
func (f *FSM) Apply(term uint64, c *Command) (Result, []Trigger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	z := f.s.clock.Next(term)
	f.dirty = true
	t := txn{f: f, s: &f.s, g: f.gen, zxid: int64(z), cmd: c}
	res := Result{Zxid: z}
	if c.Session != 0 && c.Type != CmdCreateSession && c.Type != CmdCloseSession && c.Type != CmdAttachSession {
		sess, ok := f.s.sessions.Get(c.Session)
		if !ok {
			res.Err = &vocab.Error{Code: vocab.SessionExpired, Op: c.Type.String()}
			return res, nil
		}
		if c.Owner != "" && sess.owner != "" && c.Owner != sess.owner {
			res.Err = &vocab.Error{Code: vocab.SessionMoved, Op: c.Type.String()}
			return res, nil
		}
	}
	switch c.Type {
	case CmdCreateSession:
		res.SessionID, res.Err = t.createSession()
	case CmdCloseSession:
		res.Err = t.closeSession()
	case CmdAttachSession:
		res.Err = t.attachSession()
	case CmdMulti:
		res.Multi, res.Err = t.multi()
	case CmdCreate, CmdDelete, CmdSetData, CmdSetACL, CmdCheck, CmdDeleteContainer, CmdSetConfig:
		var r OpResult
		r, res.Err = t.op(&c.Op)
		res.Path, res.Stat = r.Path, r.Stat
	default:
		res.Err = &vocab.Error{Code: vocab.Unimplemented, Op: c.Type.String()}
	}
	return res, t.triggers
}

// View returns an immutable view of the current state: a state after some
// whole command. Taking one is O(1); the writer then copies what it changes.
func (f *FSM) View() *View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.viewLocked()
}

func (f *FSM) viewLocked() *View {
	if f.view == nil || f.dirty {
		f.view = &View{s: f.s}
		f.freezeLocked()
	}
	return f.view
}

// freezeLocked makes everything built so far immutable.
func (f *FSM) freezeLocked() {
	f.gen++
	f.dirty = false
}

// LastZxid returns the zxid of the last applied command.
func (f *FSM) LastZxid() zxid.Zxid {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.s.clock.Last()
}
