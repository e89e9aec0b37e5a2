package fsm

import (
	"slices"
	"strings"

	"coord/vocab"
	"coord/zxid"
)

// View is an immutable state of the FSM as it was after some whole command.
// Any number of goroutines may read one while the FSM goes on applying.
// Byte slices it returns are shared with the state: callers must not change
// them.
type View struct {
	s state
}

// LastZxid is the zxid of the last command applied in this state.
func (v *View) LastZxid() zxid.Zxid { return v.s.clock.Last() }

// Clock returns the zxid clock of this state.
func (v *View) Clock() zxid.Clock { return v.s.clock }

// NodeCount is the number of znodes, the root included.
func (v *View) NodeCount() int { return v.s.nodes }

func (v *View) node(op, path string) (*znode, error) {
	n := v.s.lookup(path)
	if n == nil {
		return nil, errf(vocab.NoNode, op, path)
	}
	return n, nil
}

// Exists returns the Stat of the node at path (no ACL check, as ZooKeeper).
func (v *View) Exists(path string) (vocab.Stat, error) {
	n, err := v.node("exists", path)
	if err != nil {
		return vocab.Stat{}, err
	}
	return n.stat(), nil
}

// GetData returns the data and Stat of the node at path if ids may read it.
func (v *View) GetData(path string, ids []vocab.Id) ([]byte, vocab.Stat, error) {
	data, st, _, err := v.GetDataKind(path, ids)
	return data, st, err
}

// GetDataKind is GetData that also answers the node's kind where Stat
// cannot: its stored owner if it is a container or a TTL node
// (ZooKeeper's EphemeralType encoding, which Stat shows as 0), else 0.
func (v *View) GetDataKind(path string, ids []vocab.Id) ([]byte, vocab.Stat, int64, error) {
	n, err := v.node("getData", path)
	if err != nil {
		return nil, vocab.Stat{}, 0, err
	}
	if !n.acl.check(vocab.PermRead, ids) {
		return nil, vocab.Stat{}, 0, errf(vocab.NoAuth, "getData", path)
	}
	var kindOwner int64
	switch kind, _ := KindOfOwner(n.owner); kind {
	case OwnerContainer, OwnerTTL:
		kindOwner = n.owner
	}
	return n.bytes(), n.stat(), kindOwner, nil
}

// GetChildren returns the names of the children of path, sorted, and the
// node's Stat (getChildren2), if ids may read it.
func (v *View) GetChildren(path string, ids []vocab.Id) ([]string, vocab.Stat, error) {
	n, err := v.node("getChildren", path)
	if err != nil {
		return nil, vocab.Stat{}, err
	}
	if !n.acl.check(vocab.PermRead, ids) {
		return nil, vocab.Stat{}, errf(vocab.NoAuth, "getChildren", path)
	}
	names := make([]string, 0, n.kids.Len())
	n.kids.Ascend(func(name string, _ *znode) bool {
		names = append(names, name)
		return true
	})
	return names, n.stat(), nil
}

// GetACL returns the ACL and Stat of the node at path. ZooKeeper lets a
// caller with READ or ADMIN see the ACL; one without ADMIN sees digest
// hashes redacted.
func (v *View) GetACL(path string, ids []vocab.Id) ([]vocab.ACL, vocab.Stat, error) {
	n, err := v.node("getACL", path)
	if err != nil {
		return nil, vocab.Stat{}, err
	}
	if !n.acl.check(vocab.PermRead|vocab.PermAdmin, ids) {
		return nil, vocab.Stat{}, errf(vocab.NoAuth, "getACL", path)
	}
	acl := slices.Clone(n.acl.acls)
	if !n.acl.check(vocab.PermAdmin, ids) {
		acl = RedactACL(acl)
	}
	return acl, n.stat(), nil
}

// GetAllChildrenNumber counts every descendant of path, if ids may read it.
func (v *View) GetAllChildrenNumber(path string, ids []vocab.Id) (int, error) {
	n, err := v.node("getAllChildrenNumber", path)
	if err != nil {
		return 0, err
	}
	if !n.acl.check(vocab.PermRead, ids) {
		return 0, errf(vocab.NoAuth, "getAllChildrenNumber", path)
	}
	if n == v.s.root {
		return v.s.nodes - 1, nil
	}
	return countDescendants(n), nil
}

func countDescendants(n *znode) int {
	total := n.kids.Len()
	n.kids.Ascend(func(_ string, c *znode) bool {
		if c.kids.Len() > 0 {
			total += countDescendants(c)
		}
		return true
	})
	return total
}

// GetEphemerals returns the sorted paths of the session's ephemeral nodes
// that start with prefix ("/" or "" for all), as ZooKeeper's getEphemerals.
func (v *View) GetEphemerals(sessionID int64, prefix string) []string {
	sess, ok := v.s.sessions.Get(sessionID)
	if !ok {
		return []string{}
	}
	out := []string{}
	sess.ephemerals.Ascend(func(p string, _ struct{}) bool {
		if prefix == "" || prefix == "/" || strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
		return true
	})
	return out
}

// SessionInfo is one entry of the session table.
type SessionInfo struct {
	ID         int64
	Timeout    int32 // ms
	Password   []byte
	Owner      string // the connection the session belongs to
	Ephemerals int    // number of ephemeral nodes it owns
}

func (s *session) info() SessionInfo {
	return SessionInfo{ID: s.id, Timeout: s.timeout, Password: s.password, Owner: s.owner, Ephemerals: s.ephemerals.Len()}
}

// Session looks a session up.
func (v *View) Session(id int64) (SessionInfo, bool) {
	s, ok := v.s.sessions.Get(id)
	if !ok {
		return SessionInfo{}, false
	}
	return s.info(), true
}

// Sessions lists every session, by id.
func (v *View) Sessions() []SessionInfo {
	out := make([]SessionInfo, 0, v.s.sessions.Len())
	v.s.sessions.Ascend(func(_ int64, s *session) bool {
		out = append(out, s.info())
		return true
	})
	return out
}

// ContainerCandidates lists the containers the leader should propose to
// delete: those with no children that have had at least one (ZooKeeper's
// ContainerManager rule; a never-used container stays).
func (v *View) ContainerCandidates() []string {
	var out []string
	v.s.containers.Ascend(func(p string, _ struct{}) bool {
		if n := v.s.lookup(p); n != nil && n.kids.Len() == 0 && n.cversion > 0 {
			out = append(out, p)
		}
		return true
	})
	return out
}

// ExpiredTTLs lists the TTL nodes without children whose ttl has passed since
// their last change at time now (ms since the epoch).
func (v *View) ExpiredTTLs(now int64) []string {
	var out []string
	v.s.ttls.Ascend(func(p string, _ struct{}) bool {
		if n := v.s.lookup(p); n != nil && n.kids.Len() == 0 {
			if _, ttl := KindOfOwner(n.owner); now-n.mtime > ttl {
				out = append(out, p)
			}
		}
		return true
	})
	return out
}
