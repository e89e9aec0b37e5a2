package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"coord/fsm"
	"coord/server/replica"
	"coord/session"
	"coord/vocab"
	"coord/watch"
)

// Config is what the session layer needs of its server.
type Config struct {
	ServerID       string         // told to clients in ConnectReply
	Bounds         session.Bounds // session timeouts are negotiated into these
	MaxDataBytes   int            // the largest data a write may carry (refused before the log)
	MaxOutstanding int            // a connection's bound on messages in flight (outbox)
	MaxQueuedBytes int            // a connection's bound on unsent bytes (outbox)
	// MaxWatchesPerSession bounds the watches a session may hold on this
	// server (0: no bound); see watchRefused.
	MaxWatchesPerSession int
	// SuperDigest is the superuser's digest id ("user:hash"); a session
	// that authenticates as it also holds super: (every ACL passes).
	SuperDigest string
	// SASLUsers are the users and passwords of SASL DIGEST-MD5 logins
	// (none: SASL is refused).
	SASLUsers map[string]string
	// Audit, if set, receives the audit log's records (audit.go).
	Audit   *slog.Logger
	Clock   session.Clock
	Logger  *slog.Logger
	Metrics Metrics
	// WaitServing waits, up to the context's deadline, until the server
	// serves sessions (it is in contact with a leader), or says why not.
	WaitServing func(ctx context.Context) error
	// ReadOnly reports whether the server is in read-only mode now: cut off
	// from the quorum with read-only mode on (readonly.go). nil: never.
	ReadOnly func() bool
	// Reconfig carries out a reconfig request of a session holding ids
	// and answers it (a BodyData reply: the new /zookeeper/config); nil
	// answers ReconfigDisabled.
	Reconfig func(ctx context.Context, ids []vocab.Id, args *ReconfigArgs) *Reply
}

// Metrics is told of what the session layer does.
type Metrics interface {
	// Request counts a request answered with code, which began at start.
	Request(op string, code vocab.Code, start time.Time)
	// Event counts a watch event or state notification queued.
	Event()
	// Throttled is told when a connection starts (true) or stops (false)
	// waiting for its client to read its replies.
	Throttled(start bool)
	// ReadOnlySession counts a session connected in read-only mode.
	ReadOnlySession()
	// ObserveStage times a write's stage (replica.Stage): the session
	// layer observes StageSession, StageReply and StageTotal.
	replica.StageObserver
	// WatchesRefused counts n watches of a request op (getData, exists,
	// getChildren, addWatch, setWatches) refused by MaxWatchesPerSession.
	WatchesRefused(op string, n int)
}

// Layer is a server's session layer: the sessions connected to this server
// (Conn), the request path they share, the expiry tracker kept in step with
// the log, watch registration and delivery, and each session's ordered
// outbound stream. It sits on a replica (Attach) and is the replica's
// Observer.
type Layer struct {
	cfg     Config
	log     *slog.Logger
	clock   session.Clock
	rep     Replica // the replica the requests go through (replica.go)
	watches *watch.Registry
	tracker *session.Tracker
	connSeq atomic.Uint64 // numbers the connections of this boot
	audit   *auditor      // nil: no audit log

	mu    sync.Mutex
	conns map[int64]*Conn         // sessions connected here
	local map[int64]*localSession // read-only mode's local sessions (readonly.go)

	// Sessions heard from since the last report, on a follower: a
	// connection's own flag (Conn.Touch, every request: no lock), and
	// these, touched by id, left by a connection that ended, or put back
	// after a report failed.
	touchMu sync.Mutex
	touched map[int64]struct{}

	expiry expiry // expired sessions' closes, a bounded number at a time (expiry.go)
}

// New returns a session layer; Attach gives it its replica before any
// client connects.
func New(cfg Config, tick time.Duration) (*Layer, error) {
	if cfg.Clock == nil {
		cfg.Clock = session.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tracker, err := session.NewTracker(tick, cfg.Clock)
	if err != nil {
		return nil, err
	}
	l := &Layer{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, watches: watch.NewLimited(cfg.MaxWatchesPerSession), tracker: tracker,
		conns: map[int64]*Conn{}, touched: map[int64]struct{}{}, local: map[int64]*localSession{}}
	if cfg.Audit != nil {
		l.audit = newAuditor(cfg.Audit)
	}
	return l, nil
}

// Attach sets the replica the sessions' requests go through: the server's
// raft member (*replica.Replica), or a test's fake.
func (l *Layer) Attach(rep Replica) { l.rep = rep }

// Connect creates a session (req.SessionID 0) or re-attaches one and
// registers the connection here; the front end answers the client with the
// reply. Its errors wrap ErrUnavailable, ErrBehind, ErrSessionExpired or
// ErrWrongPassword, which each front end maps to its wire.
func (l *Layer) Connect(ctx context.Context, req *ConnectRequest, ip string) (*Conn, *ConnectReply, error) {
	return l.connect(ctx, req, ip)
}

// Why Connect refused: each front end maps these to its wire (gRPC status
// codes; ZooKeeper answers an expired session or a wrong password with a
// zero session and closes the connection otherwise).
var (
	// ErrUnavailable: this server cannot take the session now (no contact
	// with a leader, or the session's entry failed); try another server.
	ErrUnavailable = errors.New("unavailable")
	// ErrBehind: this server has not yet applied what the client has seen.
	ErrBehind = errors.New("server behind the client")
	// ErrSessionExpired: the session to re-attach is gone.
	ErrSessionExpired = errors.New("session expired")
	// ErrWrongPassword: the password does not match the session's.
	ErrWrongPassword = errors.New("wrong session password")
)

// refusal is a Connect error: kind for errors.Is, msg for people.
type refusal struct {
	kind error
	msg  string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.kind }

func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// digestIdentities are the ids a session gains by authenticating with
// digest id: super: first if id is the superuser's, then id itself (the
// order ZooKeeper's DigestAuthenticationProvider adds them in).
func (l *Layer) digestIdentities(id vocab.Id) []vocab.Id {
	if l.cfg.SuperDigest != "" && id.ID == l.cfg.SuperDigest {
		return []vocab.Id{{Scheme: "super", ID: ""}, id}
	}
	return []vocab.Id{id}
}

// Touch records that session id was heard from, by id (a session
// connected here touches through its Conn). On the leader it extends the
// session's deadline at once; elsewhere the session goes with the next
// ReportTouches, which tells the leader. It reports whether the session
// is known.
func (l *Layer) Touch(id int64) bool {
	if l.rep.IsLeader() {
		return l.tracker.TouchStored(id)
	}
	// The tracker follows the log on every server, so it knows every
	// session and its timeout (one copy, from the session table).
	if !l.tracker.Contains(id) {
		return false
	}
	l.touchMu.Lock()
	l.touched[id] = struct{}{}
	l.touchMu.Unlock()
	return true
}

// TouchAll is Touch for each of a follower's reported sessions, under one
// lock of the tracker on the leader: the report of 15,000 clients' pings
// taken one lock at a time queued behind those clients' own requests for
// seconds. It returns the unknown ids.
func (l *Layer) TouchAll(ids []int64) (unknown []int64) {
	if l.rep.IsLeader() {
		return l.tracker.TouchStoredAll(ids)
	}
	// A report that reached a former leader: Touch passes it on with this
	// server's own next report.
	for _, id := range ids {
		if !l.Touch(id) {
			unknown = append(unknown, id)
		}
	}
	return unknown
}

// ReportTouches hands the sessions touched here since the last report to
// send, which tells the leader (nothing to do on the leader, whose
// touches extend the deadlines at once). If send fails (the leader slow
// to answer, or changing), the sessions go with the next report: a leader
// that misses a few reports in a row must not expire sessions whose
// clients kept pinging.
// It returns how many sessions send was given.
func (l *Layer) ReportTouches(send func(ids []int64) error) (int, error) {
	l.touchMu.Lock()
	if l.rep.IsLeader() {
		// Its connections' touches went to the tracker (Conn.Touch), and
		// TakeOver cleared what was marked before it led.
		clear(l.touched)
		l.touchMu.Unlock()
		return 0, nil
	}
	pending := l.touched
	l.touched = make(map[int64]struct{}, len(pending))
	l.touchMu.Unlock()
	ids := make([]int64, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	l.mu.Lock()
	for id, c := range l.conns {
		if _, dup := pending[id]; c.touched.Swap(false) && !dup {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	if len(ids) == 0 {
		return 0, nil
	}
	err := send(ids)
	if err != nil {
		l.touchMu.Lock()
		for _, id := range ids {
			l.touched[id] = struct{}{}
		}
		l.touchMu.Unlock()
	}
	return len(ids), err
}

// TakeOver gives every session a full timeout from now: a new leader
// cannot know when the old leader last heard from them. It returns how
// many sessions there are.
func (l *Layer) TakeOver() int {
	l.expiry.mu.Lock()
	l.expiry.queue = nil // every session is re-armed: none is due
	l.expiry.mu.Unlock()
	// What this server marked for reports while it followed is spent:
	// every session gets a full timeout here, and a stale mark reported
	// after a later step down would touch a session long after its client
	// was last heard from.
	l.touchMu.Lock()
	clear(l.touched)
	l.touchMu.Unlock()
	for _, c := range l.Conns() {
		c.touched.Store(false)
	}
	l.tracker.ResetAll(l.clock.Now())
	return l.tracker.Len()
}

// plantedKeepEphemerals is nil except in builds with the jepsenplanted tag
// (planted_jepsen.go), where it makes the leader forget an expired session
// instead of committing the closeSession that deletes its ephemerals: a
// known bug for jepsen/'s sessions checker to find.
var plantedKeepEphemerals func() bool

// Conns returns the connections here now.
func (l *Layer) Conns() []*Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*Conn, 0, len(l.conns))
	for _, c := range l.conns {
		out = append(out, c)
	}
	return out
}

// ConnCount is how many sessions are connected here.
func (l *Layer) ConnCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Sessions is how many sessions the cluster has (the tracker follows the
// log on every server).
func (l *Layer) Sessions() int { return l.tracker.Len() }

// Watches is the registry of the watches of the sessions connected here.
func (l *Layer) Watches() *watch.Registry { return l.watches }

// Applied (replica.Observer) runs inside apply, under the FSM's exclusive lock, after each
// command: it keeps the session tracker in step with the log and delivers
// watch events to the sessions connected here.
func (l *Layer) Applied(cmd *fsm.Command, res fsm.Result, triggers []fsm.Trigger) {
	switch {
	case cmd.Type == fsm.CmdCreateSession && res.Err == nil:
		timeout := time.Duration(cmd.Timeout) * time.Millisecond
		l.tracker.Add(res.SessionID, timeout)
	case cmd.Type == fsm.CmdAttachSession && res.Err == nil:
		// The session moved to another connection: the one here, if any,
		// is stale and goes, as ZooKeeper closes it.
		l.mu.Lock()
		c := l.conns[cmd.Session]
		l.mu.Unlock()
		if c != nil && c.owner != cmd.Owner {
			go c.Shut(fmt.Errorf("session 0x%x moved", cmd.Session))
		}
	case cmd.Type == fsm.CmdCloseSession && res.Err == nil:
		l.touchMu.Lock()
		delete(l.touched, cmd.Session)
		l.touchMu.Unlock()
		l.mu.Lock()
		c := l.conns[cmd.Session]
		l.mu.Unlock()
		l.tracker.Remove(cmd.Session)
		l.watches.RemoveSession(cmd.Session)
		if c != nil {
			c.sessionClosed()
		}
	}
	if len(triggers) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range triggers {
		for _, ev := range l.watches.Trigger(t) {
			// Only a session that may read the node at the change is told
			// (ZooKeeper since CVE-2024-23944); the watch is spent either
			// way, as ZooKeeper's is.
			if c := l.conns[ev.Session]; c != nil && fsm.CheckACL(t.ACL, vocab.PermRead, c.identities()) {
				c.event(watchEvent(ev))
			}
		}
	}
}

// Restored (replica.Observer) rebuilds what derives from the state after a snapshot was
// installed, and disconnects local clients so they re-attach and re-register
// their watches against the new state.
func (l *Layer) Restored(v *fsm.View) {
	fresh := map[int64]time.Duration{}
	for _, info := range v.Sessions() {
		fresh[info.ID] = time.Duration(info.Timeout) * time.Millisecond
	}
	l.mu.Lock()
	conns := make([]*Conn, 0, len(l.conns))
	for _, c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, id := range l.tracker.IDs() {
		if _, ok := fresh[id]; !ok {
			l.tracker.Remove(id)
		}
	}
	for id, t := range fresh {
		l.tracker.Add(id, t)
	}
	l.tracker.ResetAll(l.clock.Now())
	for _, c := range conns {
		go c.Shut(errors.New("server state replaced by a snapshot"))
	}
}
