package fsm

import (
	"coord/vocab"
	"slices"
	"weak"
)

// aclList is an interned, immutable ACL list. Nodes with equal ACLs share one
// aclList (most share OpenACLUnsafe), as ZooKeeper's ACL cache does, so a
// znode pays one pointer for its ACL.
type aclList struct {
	acls []vocab.ACL
	key  string // aclKey(acls): the identity used by interning and snapshots
	open bool   // exactly OpenACLUnsafe: every check passes
}

// check reports whether ids may do perm on a node with this ACL.
func (l *aclList) check(perm vocab.Perm, ids []vocab.Id) bool {
	return l.open || CheckACL(l.acls, perm, ids)
}

// aclTable interns ACL lists. It holds them weakly: a list no node refers to
// any more (in the live tree or any view) is collected, and its entry is
// swept when the table has doubled since the last sweep. Only the applying
// goroutine uses it.
type aclTable struct {
	byKey     map[string]weak.Pointer[aclList]
	open      *aclList // kept strongly: it is the default
	sweepNext int
}

func newACLTable() *aclTable {
	t := &aclTable{byKey: make(map[string]weak.Pointer[aclList]), sweepNext: 64}
	t.open = t.intern(vocab.OpenACLUnsafe)
	return t
}

// intern returns the shared aclList equal to acls.
func (t *aclTable) intern(acls []vocab.ACL) *aclList {
	if t.open != nil && IsOpenACL(acls) {
		return t.open
	}
	key := aclKey(acls)
	if wp, ok := t.byKey[key]; ok {
		if l := wp.Value(); l != nil {
			return l
		}
	}
	l := &aclList{acls: slices.Clone(acls), key: key, open: IsOpenACL(acls)}
	t.byKey[key] = weak.Make(l)
	if len(t.byKey) >= t.sweepNext {
		t.sweep()
	}
	return l
}

func (t *aclTable) sweep() {
	for k, wp := range t.byKey {
		if wp.Value() == nil {
			delete(t.byKey, k)
		}
	}
	t.sweepNext = max(64, 2*len(t.byKey))
}
