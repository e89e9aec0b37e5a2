package sessions

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"coord/fsm"
	"coord/vocab"
)

// The audit log (Config.Audit): one record per write a client of this
// server made and per authentication, with who (the session and its
// identities), what (operation, znode, node type) and the result, as
// ZooKeeper's audit log records them (audit.enable). Records are queued
// and written by their own goroutine, so apply, which completes writes,
// never waits for the audit log's disk.

// auditor writes audit records in order, off the apply path.
type auditor struct {
	log  *slog.Logger
	mu   sync.Mutex
	cond *sync.Cond
	q    []auditRecord
	stop bool
	done chan struct{}
}

type auditRecord struct {
	attrs []slog.Attr
}

func newAuditor(log *slog.Logger) *auditor {
	a := &auditor{log: log, done: make(chan struct{})}
	a.cond = sync.NewCond(&a.mu)
	go a.run()
	return a
}

func (a *auditor) add(attrs ...slog.Attr) {
	a.mu.Lock()
	if !a.stop {
		a.q = append(a.q, auditRecord{attrs: attrs})
		a.cond.Signal()
	}
	a.mu.Unlock()
}

func (a *auditor) run() {
	defer close(a.done)
	for {
		a.mu.Lock()
		for len(a.q) == 0 && !a.stop {
			a.cond.Wait()
		}
		q, stop := a.q, a.stop
		a.q = nil
		a.mu.Unlock()
		for _, r := range q {
			a.log.LogAttrs(context.Background(), slog.LevelInfo, "audit", r.attrs...)
		}
		if stop {
			return
		}
	}
}

// close writes what is queued and stops.
func (a *auditor) close() {
	a.mu.Lock()
	a.stop = true
	a.cond.Signal()
	a.mu.Unlock()
	<-a.done
}

// Close stops the session layer's background work (the audit log's
// writer, after it wrote what was queued).
func (l *Layer) Close() {
	if l.audit != nil {
		l.audit.close()
	}
}

// AuditUsers is a caller's identities as the audit log names them (for
// writes the server proposes for a session, such as reconfig's).
func AuditUsers(ids []vocab.Id) string { return auditUsers(ids) }

// auditUsers is the session's identities as ZooKeeper's audit log names
// them: comma-separated, the user part of digest ids.
func auditUsers(ids []vocab.Id) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		name := id.ID
		if id.Scheme == "digest" {
			name, _, _ = strings.Cut(name, ":")
		}
		b.WriteString(name)
	}
	return b.String()
}

// nodeType names a create mode as ZooKeeper's audit log does.
func nodeType(m vocab.CreateMode) string {
	switch m {
	case vocab.ModePersistent:
		return "persistent"
	case vocab.ModeEphemeral:
		return "ephemeral"
	case vocab.ModePersistentSequential:
		return "persistent_sequential"
	case vocab.ModeEphemeralSequential:
		return "ephemeral_sequential"
	case vocab.ModeContainer:
		return "container"
	case vocab.ModePersistentTTL:
		return "persistent_with_ttl"
	case vocab.ModePersistentSequentialTTL:
		return "persistent_sequential_with_ttl"
	}
	return "unknown"
}

// auditWrite records a write of this session and its outcome (code OK:
// success; another code: failure; fate unknown: connectionloss).
func (c *Conn) auditWrite(cmd *fsm.Command, res fsm.Result, err error) {
	a := c.l.audit
	if a == nil {
		return
	}
	ids := c.identities()
	if attrs, ok := writeAttrs(cmd, res, err); ok {
		a.add(append([]slog.Attr{slog.String("session", sessionHex(c.id)), slog.String("user", auditUsers(ids)),
			slog.String("ip", c.ip(ids))}, attrs...)...)
	}
}

// AuditServerWrite records a write this server proposed itself, not for a
// client session of its own: a session's expiry, a container's clean-up,
// the membership in /zookeeper/config (user "coord:<server id>"), or an
// operator's admin call (user: the admin identity). With the client writes
// each server records for its sessions, every committed write is in the
// audit log of the server it entered by, once.
func (l *Layer) AuditServerWrite(user string, cmd *fsm.Command, res fsm.Result, err error) {
	a := l.audit
	if a == nil {
		return
	}
	if user == "" {
		user = "coord:" + l.cfg.ServerID
	}
	session := ""
	if cmd.Type == fsm.CmdCloseSession {
		session = sessionHex(cmd.Session)
	}
	if attrs, ok := writeAttrs(cmd, res, err); ok {
		a.add(append([]slog.Attr{slog.String("session", session), slog.String("user", user), slog.String("ip", "")}, attrs...)...)
	}
}

// writeAttrs is the operation, znode and result of a write's audit record
// (false for a command that is not audited).
func writeAttrs(cmd *fsm.Command, res fsm.Result, err error) ([]slog.Attr, bool) {
	op, znode := "", cmd.Op.Path
	var extra []slog.Attr
	switch cmd.Type {
	case fsm.CmdCreate:
		op = "create"
		extra = append(extra, slog.String("znode_type", nodeType(cmd.Op.Mode)))
		if res.Err == nil && res.Path != "" {
			znode = res.Path
		}
	case fsm.CmdDelete:
		op = "delete"
	case fsm.CmdSetData:
		op = "setData"
	case fsm.CmdSetACL:
		op = "setAcl"
		extra = append(extra, slog.String("acl", aclString(cmd.Op.ACL)))
	case fsm.CmdMulti:
		op = "multiOperation"
		paths := make([]string, len(cmd.Ops))
		for i := range cmd.Ops {
			paths[i] = cmd.Ops[i].Path
		}
		znode = strings.Join(paths, ",")
	case fsm.CmdCloseSession:
		op = "closeSession"
	case fsm.CmdDeleteContainer:
		op = "delete"
		extra = append(extra, slog.String("reason", "container or TTL clean-up"))
	case fsm.CmdSetConfig:
		op = "reconfig"
	default:
		return nil, false
	}
	attrs := append([]slog.Attr{slog.String("operation", op), slog.String("znode", znode)}, extra...)
	switch {
	case err != nil:
		attrs = append(attrs, slog.String("result", "connectionloss"))
	case res.Err != nil:
		attrs = append(attrs, slog.String("result", "failure"), slog.String("code", vocab.CodeOf(res.Err).String()))
	default:
		attrs = append(attrs, slog.String("result", "success"))
	}
	return attrs, true
}

// auditAuth records an authentication attempt.
func (c *Conn) auditAuth(scheme string, ok bool) {
	a := c.l.audit
	if a == nil {
		return
	}
	ids := c.identities()
	result := "success"
	if !ok {
		result = "failure"
	}
	a.add(slog.String("session", sessionHex(c.id)), slog.String("user", auditUsers(ids)), slog.String("ip", c.ip(ids)),
		slog.String("operation", "addAuth"), slog.String("scheme", scheme), slog.String("result", result))
}

// ip is the session's address (its ip id).
func (c *Conn) ip(ids []vocab.Id) string {
	for _, id := range ids {
		if id.Scheme == "ip" {
			return id.ID
		}
	}
	return ""
}

func aclString(acl []vocab.ACL) string {
	parts := make([]string, len(acl))
	for i, a := range acl {
		parts[i] = a.ID.Scheme + ":" + a.ID.ID + ":" + permString(a.Perms)
	}
	return strings.Join(parts, ",")
}

// permString is ZooKeeper's short form of permissions (cdrwa).
func permString(p vocab.Perm) string {
	var b strings.Builder
	for _, x := range []struct {
		bit vocab.Perm
		c   byte
	}{{vocab.PermCreate, 'c'}, {vocab.PermDelete, 'd'}, {vocab.PermRead, 'r'}, {vocab.PermWrite, 'w'}, {vocab.PermAdmin, 'a'}} {
		if p&x.bit != 0 {
			b.WriteByte(x.c)
		}
	}
	return b.String()
}
