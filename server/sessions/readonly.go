package sessions

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"coord/session"
	"coord/vocab"
	"coord/zxid"
)

// Read-only mode, as ZooKeeper's ReadOnlyZooKeeperServer (3.8, with
// readonlymode.enabled=true): a server cut off from the quorum keeps
// serving reads to clients that said they accept a read-only server (the
// canBeReadOnly flag at the end of the ConnectRequest) and answers every
// write with NotReadOnly. Clients that did not ask are refused as before.
// The server says when it is read-only (Config.ReadOnly): as
// ZooKeeper, only once it has not served for max(2 s, tick), or, after a
// start, heard from no leader for that long (server/leaderloss.go).
//
// A new session is a log entry, which a server without a quorum cannot
// write, so a read-only client that comes without a session (or with one
// this server does not know) gets a local session, as ZooKeeper's
// read-only server gives it: an id and password this server made up, known
// to it alone, never in the log, gone when the server has a quorum again
// or when its client has been away for its timeout. A client that comes
// with a session of the cluster (it had a read-write server before) is
// refused, its connection closed unanswered, as ZooKeeper 3.8 refuses a
// "global session reconnection in RO mode". Nothing here changes the state
// machine, so nothing here can make servers diverge.
//
// When the server is in contact with a leader again it closes every
// read-only connection (ZooKeeper shuts its read-only server down); the
// clients reconnect and get read-write sessions. A client that brings back
// a local session's id meets a server that does not know it and is told
// its session expired, as with ZooKeeper; the Java client avoids that by
// connecting without a session until it has seen a read-write server, and
// kazoo then starts a new session.

// localSession is a read-only mode session that is not in the log.
type localSession struct {
	password []byte
	timeout  int32     // ms
	conn     *Conn     // connected now (nil: away)
	gone     time.Time // when its last connection ended
}

// localSessionBit marks the ids of local sessions. A session of the log has
// a zxid for id, whose epoch would have to pass 2^30 to reach it.
const localSessionBit = int64(1) << 62

// IsLocalSession reports whether id is the id of a read-only mode's local
// session.
func IsLocalSession(id int64) bool { return id&localSessionBit != 0 }

func (l *Layer) readOnlyMode() bool { return l.cfg.ReadOnly != nil && l.cfg.ReadOnly() }

// connectReadOnly connects a client that accepts a read-only session while
// the server is in read-only mode.
func (l *Layer) connectReadOnly(req *ConnectRequest, auth []vocab.Id) (*Conn, *ConnectReply, error) {
	// As ZooKeeper: a server older than what the client has seen refuses it
	// (no waiting: without a leader it will not catch up).
	if last := zxid.Zxid(req.LastZxid); last > l.rep.LastZxid() {
		return nil, nil, refuse(ErrBehind, "client has seen zxid %v, this read-only server only %v", last, l.rep.LastZxid())
	}
	now := l.clock.Now()
	var (
		id      int64
		timeout int32
		pw      []byte
		local   bool
	)
	l.mu.Lock()
	for lid, ls := range l.local {
		if ls.conn == nil && now.Sub(ls.gone) > time.Duration(ls.timeout)*time.Millisecond {
			delete(l.local, lid)
		}
	}
	ls := l.local[req.SessionID]
	l.mu.Unlock()
	switch {
	case req.SessionID == 0:
		var b [8]byte
		p, err := session.GeneratePassword(rand.Reader)
		if _, rerr := rand.Read(b[:]); err != nil || rerr != nil {
			return nil, nil, refuse(ErrUnavailable, "read-only session: no randomness")
		}
		id = int64(binary.BigEndian.Uint64(b[:])&uint64(localSessionBit-1)) | localSessionBit
		timeout, pw, local = l.cfg.Bounds.Negotiate(req.TimeoutMs), p, true
	case ls != nil:
		if !session.CheckPassword(ls.password, req.Password) {
			return nil, nil, refuse(ErrWrongPassword, "wrong password for session 0x%x", req.SessionID)
		}
		id, timeout, pw, local = req.SessionID, ls.timeout, ls.password, true
	default:
		if _, ok := l.rep.View().Session(req.SessionID); ok {
			// ZooKeeper 3.8: "Refusing global session reconnection in RO
			// mode", the connection closed unanswered.
			return nil, nil, refuse(ErrUnavailable, "refusing a cluster session's reconnection in read-only mode (0x%x)", req.SessionID)
		}
		return nil, nil, refuse(ErrSessionExpired, "session 0x%x expired", req.SessionID)
	}
	c := newConn(l, id, timeout, "", auth)
	c.readOnly, c.local = true, local
	l.mu.Lock()
	if !l.readOnlyMode() {
		// Back in contact with a leader meanwhile: the client must find a
		// read-write session.
		l.mu.Unlock()
		return nil, nil, refuse(ErrUnavailable, "the server left read-only mode")
	}
	old := l.conns[id]
	if old != nil {
		delete(l.conns, id)
		l.watches.RemoveSession(id)
	}
	l.conns[id] = c
	if local {
		if ls == nil {
			ls = &localSession{password: pw, timeout: timeout}
			l.local[id] = ls
		}
		ls.conn = c
	}
	l.mu.Unlock()
	if old != nil {
		old.Shut(nil)
	}
	l.cfg.Metrics.ReadOnlySession()
	if req.Watches != nil {
		l.reattachWatches(c, req.Watches)
	}
	return c, &ConnectReply{SessionID: id, Password: pw, TimeoutMs: timeout,
		Zxid: int64(l.rep.LastZxid()), ServerID: l.cfg.ServerID, ReadOnly: true}, nil
}

// EndReadOnly closes every read-only connection and forgets the local
// sessions: the server is in contact with a leader again, and its clients
// are to reconnect for read-write sessions (ZooKeeper shuts its read-only
// server down). It returns how many connections it closed.
func (l *Layer) EndReadOnly(why error) int {
	l.mu.Lock()
	var ro []*Conn
	for _, c := range l.conns {
		if c.readOnly {
			ro = append(ro, c)
		}
	}
	clear(l.local)
	l.mu.Unlock()
	for _, c := range ro {
		c.Shut(why)
	}
	return len(ro)
}

// connEnded notes that a local session's connection ended (Shut).
func (l *Layer) connEnded(c *Conn) {
	l.mu.Lock()
	if ls := l.local[c.id]; ls != nil && ls.conn == c {
		ls.conn, ls.gone = nil, l.clock.Now()
	}
	l.mu.Unlock()
}

// ReadOnly reports whether this is a read-only session.
func (c *Conn) ReadOnly() bool { return c.readOnly }

// readOnlyRefusal answers a request a read-only session may not make (the
// table's ReadOnly column, ops.go), as ZooKeeper's
// ReadOnlyRequestProcessor: every write, sync, reconfig and the close of a
// session of the log get NotReadOnly; a local session's close ends it here.
// It reports whether it answered.
func (c *Conn) readOnlyRefusal(req *Request, start time.Time) bool {
	switch req.Kind.Info().ReadOnly {
	case RORefused:
	case ROEndsLocal:
		if !c.local {
			break
		}
		sl := c.out.reserve()
		if sl == nil {
			return true
		}
		c.l.mu.Lock()
		delete(c.l.local, c.id)
		c.l.mu.Unlock()
		c.answer(sl, req, &Reply{Zxid: int64(c.l.rep.LastZxid())}, start)
		go c.Shut(nil)
		return true
	default:
		return false
	}
	c.waitWrites()
	sl := c.out.reserve()
	if sl == nil {
		return true
	}
	c.answer(sl, req, &Reply{Err: vocab.NotReadOnly, Zxid: int64(c.l.rep.LastZxid())}, start)
	return true
}
