package fsm

import (
	"coord/vocab"
	"strings"
)

// txn applies one command to the state. It copies the data it keeps, so a
// caller may reuse the command's buffers. Validation happens here, at apply,
// in ZooKeeper's order (PrepRequestProcessor), so every server reaches the
// same verdict; only once an op is known to succeed does it change anything.
type txn struct {
	f        *FSM
	s        *state
	g        uint64
	zxid     int64
	cmd      *Command
	triggers []Trigger
	// quotaBase, during a multi, is the state before it: quota checks
	// read their stats there (checkQuota).
	quotaBase *state
}

// fire records a trigger; acl is the node's (or, for a child change, the
// parent's) that decides who is told.
func (t *txn) fire(path string, typ vocab.EventType, acl *aclList) {
	t.triggers = append(t.triggers, Trigger{Path: path, Type: typ, Zxid: t.zxid, ACL: acl.acls})
}

func (t *txn) createSession() (int64, error) {
	id := t.zxid
	if _, ok := t.s.sessions.Get(id); ok { // cannot happen: zxids are unique
		return 0, &vocab.Error{Code: vocab.SystemError, Op: "createSession"}
	}
	if t.cmd.Timeout <= 0 {
		return 0, &vocab.Error{Code: vocab.BadArguments, Op: "createSession"}
	}
	t.s.sessions.Set(t.g, id, &session{
		gen: t.g, id: id, timeout: t.cmd.Timeout, password: append([]byte(nil), t.cmd.Password...),
		owner: t.cmd.Owner,
	})
	return id, nil
}

// attachSession hands the session to the connection cmd.Owner (a client
// re-attached, possibly to another server).
func (t *txn) attachSession() error {
	sess, ok := t.s.sessions.Get(t.cmd.Session)
	if !ok {
		return &vocab.Error{Code: vocab.SessionExpired, Op: "attachSession"}
	}
	sess = sess.mut(t.g)
	sess.owner = t.cmd.Owner
	t.s.sessions.Set(t.g, sess.id, sess)
	return nil
}

// closeSession removes the session and its ephemerals (in path order, so the
// triggers are the same everywhere). Closing a session that is gone, as a
// leader that proposes an expiry twice will, is SessionExpired and changes
// nothing.
func (t *txn) closeSession() error {
	id := t.cmd.Session
	sess, ok := t.s.sessions.Get(id)
	if !ok {
		return &vocab.Error{Code: vocab.SessionExpired, Op: "closeSession"}
	}
	if t.cmd.Owner != "" && sess.owner != "" && t.cmd.Owner != sess.owner {
		return &vocab.Error{Code: vocab.SessionMoved, Op: "closeSession"}
	}
	var paths []string
	sess.ephemerals.Ascend(func(p string, _ struct{}) bool {
		paths = append(paths, p)
		return true
	})
	for _, p := range paths {
		t.removeNode(p)
	}
	t.s.sessions.Delete(t.g, id)
	return nil
}

// multi applies ops all or nothing. The state is frozen first so that a
// failure can put the pre-multi state back untouched.
func (t *txn) multi() ([]OpResult, error) {
	ops := t.cmd.Ops
	results := make([]OpResult, len(ops))
	saved := *t.s
	t.quotaBase = &saved
	defer func() { t.quotaBase = nil }()
	t.f.freezeLocked()
	t.f.dirty = true // the multi is a change a cached view does not show
	t.g = t.f.gen
	for i := range ops {
		op := &ops[i]
		var err error
		switch op.Type {
		case CmdCreate, CmdDelete, CmdSetData, CmdCheck:
			results[i], err = t.op(op)
		default:
			err = &vocab.Error{Code: vocab.BadArguments, Op: "multi", Path: op.Path}
		}
		if err != nil {
			*t.s = saved
			t.triggers = nil
			for j := range results {
				results[j] = OpResult{Type: ops[j].Type, Code: vocab.OK}
				if j == i {
					results[j].Code = vocab.CodeOf(err)
				} else if j > i {
					results[j].Code = vocab.RuntimeInconsistency
				}
			}
			return results, err
		}
	}
	return results, nil
}

func (t *txn) op(op *Op) (OpResult, error) {
	r := OpResult{Type: op.Type}
	var err error
	switch op.Type {
	case CmdCreate:
		r.Path, r.Stat, err = t.create(op)
	case CmdDelete:
		err = t.delete(op)
	case CmdSetData:
		r.Stat, err = t.setData(op)
	case CmdSetACL:
		r.Stat, err = t.setACL(op)
	case CmdCheck:
		err = t.check(op)
	case CmdDeleteContainer:
		err = t.deleteContainer(op)
	case CmdSetConfig:
		if t.cmd.Type != CmdSetConfig { // never inside a multi
			err = &vocab.Error{Code: vocab.BadArguments, Op: op.Type.String(), Path: op.Path}
			break
		}
		r.Stat, err = t.setConfig(op)
	default:
		err = &vocab.Error{Code: vocab.Unimplemented, Op: op.Type.String(), Path: op.Path}
	}
	r.Code = vocab.CodeOf(err)
	return r, err
}

func (t *txn) create(op *Op) (string, vocab.Stat, error) {
	fail := func(c vocab.Code, p string) (string, vocab.Stat, error) {
		return "", vocab.Stat{}, errf(c, "create", p)
	}
	mode := op.Mode
	switch {
	case !mode.Valid():
		return fail(vocab.BadArguments, op.Path)
	case mode.IsTTL() && (op.TTL <= 0 || op.TTL > MaxTTL):
		return fail(vocab.BadArguments, op.Path)
	case !mode.IsTTL() && op.TTL > 0:
		return fail(vocab.BadArguments, op.Path)
	case mode.IsEphemeral() && t.cmd.Session == 0:
		return fail(vocab.BadArguments, op.Path)
	case strings.IndexByte(op.Path, '/') < 0 || strings.IndexByte(op.Path, 0) >= 0:
		return fail(vocab.BadArguments, op.Path)
	}
	acl, err := FixupACL(op.ACL, t.cmd.Auth)
	if err != nil {
		return fail(vocab.InvalidACL, op.Path)
	}
	parentPath, name := splitPath(op.Path)
	parent := t.s.lookup(parentPath)
	if parent == nil {
		return fail(vocab.NoNode, op.Path)
	}
	if !parent.acl.check(vocab.PermCreate, t.cmd.Auth) {
		return fail(vocab.NoAuth, op.Path)
	}
	path := op.Path
	if mode.IsSequential() {
		name += sequenceSuffix(parent.cversion)
		path += sequenceSuffix(parent.cversion)
	}
	if err := ValidatePath(path); err != nil {
		return fail(vocab.BadArguments, path)
	}
	if _, exists := parent.kids.Get(name); exists || path == "/" {
		return fail(vocab.NodeExists, path)
	}
	if kind, _ := KindOfOwner(parent.owner); kind == OwnerSession {
		return fail(vocab.NoChildrenForEphemerals, path)
	}
	if err := t.checkQuota("create", path, int64(len(op.Data)), 1); err != nil {
		return "", vocab.Stat{}, err
	}

	var owner int64
	switch {
	case mode.IsContainer():
		owner = ContainerOwner
	case mode.IsTTL():
		owner = TTLOwner(op.TTL)
	case mode.IsEphemeral():
		owner = t.cmd.Session
	}
	n := &znode{
		gen: t.g, acl: t.f.acls.intern(acl),
		czxid: t.zxid, mzxid: t.zxid, pzxid: t.zxid,
		ctime: t.cmd.Time, mtime: t.cmd.Time, owner: owner,
	}
	n.setData(op.Data)
	p := t.s.mutLookup(t.g, parentPath)
	p.cversion++
	p.pzxid = t.zxid
	p.kids.Set(t.g, strings.Clone(name), n)
	t.s.nodes++
	switch kind, _ := KindOfOwner(owner); kind {
	case OwnerContainer:
		t.s.containers.Set(t.g, path, struct{}{})
	case OwnerTTL:
		t.s.ttls.Set(t.g, path, struct{}{})
	case OwnerSession:
		sess, _ := t.s.sessions.Get(owner)
		sess = sess.mut(t.g)
		sess.ephemerals.Set(t.g, path, struct{}{})
		t.s.sessions.Set(t.g, owner, sess)
	}
	st := n.stat() // before the quota stats below may rewrite n's data
	if name == quotaStatNode && strings.HasPrefix(parentPath, quotaPath) {
		t.quotaStatsCreated(parentPath)
	}
	t.quotaChanged(path, int64(len(n.data)), 1)
	t.fire(path, vocab.EventNodeCreated, n.acl)
	t.fire(parentPath, vocab.EventNodeChildrenChanged, p.acl)
	return path, st, nil
}

// deleteTarget checks what delete and deleteContainer check before looking
// at the node, returning the parent path.
func deleteTarget(path, op string) (string, error) {
	if strings.IndexByte(path, '/') < 0 || strings.IndexByte(path, 0) >= 0 || isSpecialPath(path) {
		return "", errf(vocab.BadArguments, op, path)
	}
	parent, _ := splitPath(path)
	return parent, nil
}

func (t *txn) delete(op *Op) error {
	parentPath, err := deleteTarget(op.Path, "delete")
	if err != nil {
		return err
	}
	parent := t.s.lookup(parentPath)
	if parent == nil {
		return errf(vocab.NoNode, "delete", op.Path)
	}
	if !parent.acl.check(vocab.PermDelete, t.cmd.Auth) {
		return errf(vocab.NoAuth, "delete", op.Path)
	}
	n := t.s.lookup(op.Path)
	if n == nil {
		return errf(vocab.NoNode, "delete", op.Path)
	}
	if op.Version != -1 && op.Version != n.version {
		return errf(vocab.BadVersion, "delete", op.Path)
	}
	if n.kids.Len() > 0 {
		return errf(vocab.NotEmpty, "delete", op.Path)
	}
	t.removeNode(op.Path)
	return nil
}

// deleteContainer is the leader's clean-up: it removes a container that has
// no children, or a TTL node without children whose ttl has passed since its
// mtime by the command's time. Anything else is refused as ZooKeeper refuses
// it (BadVersion for a node of another kind).
func (t *txn) deleteContainer(op *Op) error {
	if _, err := deleteTarget(op.Path, "deleteContainer"); err != nil {
		return err
	}
	n := t.s.lookup(op.Path)
	if n == nil {
		return errf(vocab.NoNode, "deleteContainer", op.Path)
	}
	if n.kids.Len() > 0 {
		return errf(vocab.NotEmpty, "deleteContainer", op.Path)
	}
	switch kind, ttl := KindOfOwner(n.owner); {
	case kind == OwnerContainer:
	case kind == OwnerTTL && t.cmd.Time-n.mtime > ttl:
	default:
		return errf(vocab.BadVersion, "deleteContainer", op.Path)
	}
	t.removeNode(op.Path)
	return nil
}

// removeNode deletes the existing, childless node at path.
func (t *txn) removeNode(path string) {
	parentPath, name := splitPath(path)
	p := t.s.mutLookup(t.g, parentPath)
	n, _ := p.kids.Delete(t.g, name)
	if t.zxid > p.pzxid {
		p.pzxid = t.zxid
	}
	t.s.nodes--
	t.quotaChanged(path, -int64(len(n.data)), -1)
	switch kind, _ := KindOfOwner(n.owner); kind {
	case OwnerContainer:
		t.s.containers.Delete(t.g, path)
	case OwnerTTL:
		t.s.ttls.Delete(t.g, path)
	case OwnerSession:
		if sess, ok := t.s.sessions.Get(n.owner); ok {
			sess = sess.mut(t.g)
			sess.ephemerals.Delete(t.g, path)
			t.s.sessions.Set(t.g, n.owner, sess)
		}
	}
	t.fire(path, vocab.EventNodeDeleted, n.acl)
	t.fire(parentPath, vocab.EventNodeChildrenChanged, p.acl)
}

// nextVersion is ZooKeeper's checkAndIncVersion increment: it skips -1,
// which clients use to mean "any version" (ZOOKEEPER-4743).
func nextVersion(v int32) int32 {
	if v+1 == -1 {
		return 0
	}
	return v + 1
}

func (t *txn) setData(op *Op) (vocab.Stat, error) {
	if err := ValidatePath(op.Path); err != nil {
		return vocab.Stat{}, errf(vocab.BadArguments, "setData", op.Path)
	}
	n := t.s.lookup(op.Path)
	if n == nil {
		return vocab.Stat{}, errf(vocab.NoNode, "setData", op.Path)
	}
	if !n.acl.check(vocab.PermWrite, t.cmd.Auth) {
		return vocab.Stat{}, errf(vocab.NoAuth, "setData", op.Path)
	}
	// ZooKeeper checks the quota before the version.
	if err := t.checkQuota("setData", op.Path, int64(len(op.Data)-len(n.data)), 0); err != nil {
		return vocab.Stat{}, err
	}
	if op.Version != -1 && op.Version != n.version {
		return vocab.Stat{}, errf(vocab.BadVersion, "setData", op.Path)
	}
	old := len(n.data)
	n = t.s.mutLookup(t.g, op.Path)
	n.setData(op.Data)
	n.version = nextVersion(n.version)
	n.mtime = t.cmd.Time
	n.mzxid = t.zxid
	st := n.stat()
	t.quotaChanged(op.Path, int64(len(n.data)-old), 0)
	t.fire(op.Path, vocab.EventNodeDataChanged, n.acl)
	return st, nil
}

func (t *txn) setACL(op *Op) (vocab.Stat, error) {
	if err := ValidatePath(op.Path); err != nil {
		return vocab.Stat{}, errf(vocab.BadArguments, "setACL", op.Path)
	}
	acl, err := FixupACL(op.ACL, t.cmd.Auth)
	if err != nil {
		return vocab.Stat{}, errf(vocab.InvalidACL, "setACL", op.Path)
	}
	n := t.s.lookup(op.Path)
	if n == nil {
		return vocab.Stat{}, errf(vocab.NoNode, "setACL", op.Path)
	}
	if !n.acl.check(vocab.PermAdmin, t.cmd.Auth) {
		return vocab.Stat{}, errf(vocab.NoAuth, "setACL", op.Path)
	}
	if op.Version != -1 && op.Version != n.aversion {
		return vocab.Stat{}, errf(vocab.BadVersion, "setACL", op.Path)
	}
	n = t.s.mutLookup(t.g, op.Path)
	n.acl = t.f.acls.intern(acl)
	n.aversion = nextVersion(n.aversion)
	return n.stat(), nil
}

func (t *txn) check(op *Op) error {
	if err := ValidatePath(op.Path); err != nil {
		return errf(vocab.BadArguments, "check", op.Path)
	}
	n := t.s.lookup(op.Path)
	if n == nil {
		return errf(vocab.NoNode, "check", op.Path)
	}
	if !n.acl.check(vocab.PermRead, t.cmd.Auth) {
		return errf(vocab.NoAuth, "check", op.Path)
	}
	if op.Version != -1 && op.Version != n.version {
		return errf(vocab.BadVersion, "check", op.Path)
	}
	return nil
}
