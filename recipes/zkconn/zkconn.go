// Package zkconn adapts github.com/go-zookeeper/zk to the recipes.Conn
// interface, so the recipes run unchanged on Apache ZooKeeper (and on
// coord's ZooKeeper port).
//
// go-zookeeper's calls take no context; the adapter runs each call on a
// goroutine and returns when the call or the context ends (the call itself
// ends when its answer arrives or the connection drops). go-zookeeper v1.0.4
// has no addWatch, so AddWatch returns recipes.ErrUnsupported and the caches
// fall back to one-shot watches.
//
// Session states: the first session is StateConnected, a dropped connection
// StateSuspended, the same session back StateReconnected. When the server
// says the session expired, go-zookeeper would quietly open a new session
// on the same Conn; the adapter instead makes the Conn finished
// (StateExpired, every call failing with vocab.SessionExpired) and stops it
// from dialling again, so that no recipe ever mistakes a new session for its
// old one.
package zkconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/recipes"
	"coord/vocab"
)

// Conn is a recipes.Conn on a *zk.Conn.
type Conn struct {
	zc       *zk.Conn
	tracker  *recipes.SessionTracker
	log      *slog.Logger
	terminal atomic.Bool // expired or closed: no more calls, no more dials

	mu          sync.Mutex
	hadSession  bool
	suspended   bool
	ready       chan struct{} // closed at the first session
	closing     bool          // Close was called
	closeOnce   sync.Once
	closeDone   chan struct{}
	expiredOnce sync.Once
}

var _ recipes.Conn = (*Conn)(nil)

// Options for Connect.
type Options struct {
	// SessionTimeout asked of the server (default 10s).
	SessionTimeout time.Duration
	// Logger receives go-zookeeper's log lines at debug level (default:
	// none).
	Logger *slog.Logger
	// Dialer, if set, opens the TCP connections (tests put a proxy here).
	Dialer func(network, address string, timeout time.Duration) (net.Conn, error)
}

// Connect opens a session on the ZooKeeper servers (host:port) and waits
// until it is established or ctx ends.
func Connect(ctx context.Context, servers []string, o Options) (*Conn, error) {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Conn{tracker: recipes.NewSessionTracker(), log: o.Logger,
		ready: make(chan struct{}), closeDone: make(chan struct{})}
	dial := o.Dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	zc, _, err := zk.Connect(servers, o.SessionTimeout,
		zk.WithLogger(printfLogger{o.Logger}),
		zk.WithEventCallback(a.onEvent),
		zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
			if a.terminal.Load() {
				return nil, errors.New("zkconn: session ended")
			}
			return dial(network, address, timeout)
		}))
	if err != nil {
		return nil, err
	}
	a.zc = zc
	select {
	case <-a.ready:
		return a, nil
	case <-ctx.Done():
		a.terminal.Store(true)
		zc.Close()
		return nil, fmt.Errorf("zkconn: connect: %w", ctx.Err())
	}
}

type printfLogger struct{ l *slog.Logger }

func (p printfLogger) Printf(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "client", "go-zookeeper")
}

// onEvent runs on go-zookeeper's goroutines for every event; it must not
// block.
func (a *Conn) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev.State {
	case zk.StateHasSession:
		if !a.hadSession {
			a.hadSession = true
			close(a.ready)
			return
		}
		if a.suspended {
			a.suspended = false
			a.tracker.Set(recipes.StateReconnected)
		}
	case zk.StateDisconnected:
		if a.hadSession && !a.terminal.Load() {
			a.suspended = true
			a.tracker.Set(recipes.StateSuspended)
		}
	case zk.StateExpired:
		// Stop go-zookeeper from opening a new session: the dialer refuses
		// from now on, and the Conn is closed.
		a.terminal.Store(true)
		a.tracker.Set(recipes.StateExpired)
		a.expiredOnce.Do(func() { go a.shutdown() })
	}
}

func (a *Conn) shutdown() {
	a.closeOnce.Do(func() {
		if a.zc != nil {
			a.zc.Close()
		}
		close(a.closeDone)
	})
}

// Close ends the session, as coordconn's Close does: while the connection
// is suspended it first waits for the session to re-attach (or for ctx),
// then asks the server to close the session, which deletes its ephemerals
// at once, and waits until go-zookeeper has stopped or ctx ends. Whatever
// the outcome the Conn is finished afterwards: State is StateClosed (or
// stays StateExpired) and calls return recipes.ErrClosed.
//
// It returns nil when the close was sent on an attached session, and also
// for a Conn already closed or expired (Close is idempotent and safe to call
// concurrently). It returns an error wrapping ctx.Err() when ctx ends first:
// the session may then live on, with its ephemerals, until it times out.
// go-zookeeper does not report the server's answer to the close itself, so
// a connection lost in the instant the close is sent goes unnoticed (the
// session then expires on the server after its timeout).
func (a *Conn) Close(ctx context.Context) error {
	a.mu.Lock()
	first := !a.closing && !a.terminal.Load()
	a.closing = true
	a.mu.Unlock()
	if !first {
		select { // closed or expired, or another Close is under way
		case <-a.closeDone:
		case <-ctx.Done():
		}
		return nil
	}
	var err error
	if ctx.Err() != nil {
		err = fmt.Errorf("close: %w", ctx.Err())
	}
	for err == nil {
		st, changed := a.tracker.State()
		if st != recipes.StateSuspended {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			err = fmt.Errorf("close: %w", ctx.Err())
		}
	}
	a.mu.Lock()
	a.terminal.Store(true)
	a.tracker.Set(recipes.StateClosed)
	a.mu.Unlock()
	go a.shutdown() // go-zookeeper gives up on an unanswered close within seconds
	if err != nil {
		return err
	}
	select {
	case <-a.closeDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close: %w", ctx.Err())
	}
}

// ZK is the underlying go-zookeeper Conn.
func (a *Conn) ZK() *zk.Conn { return a.zc }

// State implements recipes.Conn.
func (a *Conn) State() (recipes.SessionState, <-chan struct{}) { return a.tracker.State() }

// SessionID implements recipes.Conn.
func (a *Conn) SessionID() int64 { return a.zc.SessionID() }

var codes = []struct {
	err  error
	code vocab.Code
}{
	{zk.ErrNoNode, vocab.NoNode},
	{zk.ErrNodeExists, vocab.NodeExists},
	{zk.ErrBadVersion, vocab.BadVersion},
	{zk.ErrNotEmpty, vocab.NotEmpty},
	{zk.ErrNoChildrenForEphemerals, vocab.NoChildrenForEphemerals},
	{zk.ErrSessionExpired, vocab.SessionExpired},
	{zk.ErrConnectionClosed, vocab.ConnectionLoss},
	{zk.ErrNoServer, vocab.ConnectionLoss},
	{zk.ErrClosing, vocab.ConnectionLoss},
	{zk.ErrNoAuth, vocab.NoAuth},
	{zk.ErrInvalidACL, vocab.InvalidACL},
	{zk.ErrAuthFailed, vocab.AuthFailed},
	{zk.ErrSessionMoved, vocab.SessionMoved},
	{zk.ErrBadArguments, vocab.BadArguments},
	{zk.ErrInvalidPath, vocab.BadArguments},
	{zk.ErrInvalidFlags, vocab.BadArguments},
	{zk.ErrAPIError, vocab.APIError},
	{zk.ErrReconfigDisabled, vocab.ReconfigDisabled},
	{zk.ErrNothing, vocab.SystemError},
	{zk.ErrUnknown, vocab.SystemError},
}

func codeOf(err error) (vocab.Code, bool) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code, true
		}
	}
	return vocab.SystemError, false
}

// mapErr turns a go-zookeeper error into a *vocab.Error for op and path.
// Once the Conn is finished every error is the reason it finished.
func (a *Conn) mapErr(err error, op, path string) error {
	if err == nil {
		return nil
	}
	if st, _ := a.tracker.State(); !st.Live() {
		return a.endErr(st, op, path)
	}
	code, ok := codeOf(err)
	if !ok {
		return fmt.Errorf("%s %s: %w", op, path, err)
	}
	return &vocab.Error{Code: code, Op: op, Path: path}
}

func (a *Conn) endErr(st recipes.SessionState, op, path string) error {
	if st == recipes.StateClosed {
		return fmt.Errorf("%s %s: %w", op, path, recipes.ErrClosed)
	}
	return &vocab.Error{Code: vocab.SessionExpired, Op: op, Path: path}
}

// call runs f on its own goroutine so that ctx can end the wait.
func call[T any](ctx context.Context, a *Conn, op, path string, f func() (T, error)) (T, error) {
	var zero T
	if st, _ := a.tracker.State(); !st.Live() {
		return zero, a.endErr(st, op, path)
	}
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("%s %s: %w", op, path, err)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return zero, a.mapErr(r.err, op, path)
		}
		if st, _ := a.tracker.State(); !st.Live() {
			return zero, a.endErr(st, op, path)
		}
		return r.v, nil
	case <-ctx.Done():
		return zero, fmt.Errorf("%s %s: %w", op, path, ctx.Err())
	}
}

type statRes struct {
	ok   bool
	data []byte
	kids []string
	path string
	st   vocab.Stat
	w    <-chan zk.Event
}

func statOf(s *zk.Stat) vocab.Stat {
	if s == nil {
		return vocab.Stat{}
	}
	return vocab.Stat{Czxid: s.Czxid, Mzxid: s.Mzxid, Ctime: s.Ctime, Mtime: s.Mtime, Version: s.Version,
		Cversion: s.Cversion, Aversion: s.Aversion, EphemeralOwner: s.EphemeralOwner,
		DataLength: s.DataLength, NumChildren: s.NumChildren, Pzxid: s.Pzxid}
}

func aclOf(acl []vocab.ACL) []zk.ACL {
	out := make([]zk.ACL, len(acl))
	for i, a := range acl {
		out[i] = zk.ACL{Perms: int32(a.Perms), Scheme: a.ID.Scheme, ID: a.ID.ID}
	}
	return out
}

// Create implements recipes.Conn.
func (a *Conn) Create(ctx context.Context, path string, data []byte, mode vocab.CreateMode, acl []vocab.ACL) (string, error) {
	return call(ctx, a, "create", path, func() (string, error) {
		if mode.IsContainer() {
			return a.zc.CreateContainer(path, data, int32(mode), aclOf(acl))
		}
		return a.zc.Create(path, data, int32(mode), aclOf(acl))
	})
}

// Delete implements recipes.Conn.
func (a *Conn) Delete(ctx context.Context, path string, version int32) error {
	_, err := call(ctx, a, "delete", path, func() (struct{}, error) { return struct{}{}, a.zc.Delete(path, version) })
	return err
}

// Exists implements recipes.Conn.
func (a *Conn) Exists(ctx context.Context, path string) (bool, vocab.Stat, error) {
	r, err := call(ctx, a, "exists", path, func() (statRes, error) {
		ok, st, err := a.zc.Exists(path)
		return statRes{ok: ok, st: statOf(st)}, err
	})
	if !r.ok {
		r.st = vocab.Stat{}
	}
	return r.ok, r.st, err
}

// ExistsW implements recipes.Conn.
func (a *Conn) ExistsW(ctx context.Context, path string) (bool, vocab.Stat, <-chan recipes.Event, error) {
	r, err := call(ctx, a, "exists", path, func() (statRes, error) {
		ok, st, w, err := a.zc.ExistsW(path)
		return statRes{ok: ok, st: statOf(st), w: w}, err
	})
	if err != nil {
		return false, vocab.Stat{}, nil, err
	}
	if !r.ok {
		r.st = vocab.Stat{}
	}
	return r.ok, r.st, oneShot(r.w), nil
}

// Get implements recipes.Conn.
func (a *Conn) Get(ctx context.Context, path string) ([]byte, vocab.Stat, error) {
	r, err := call(ctx, a, "get", path, func() (statRes, error) {
		d, st, err := a.zc.Get(path)
		return statRes{data: d, st: statOf(st)}, err
	})
	return r.data, r.st, err
}

// GetW implements recipes.Conn.
func (a *Conn) GetW(ctx context.Context, path string) ([]byte, vocab.Stat, <-chan recipes.Event, error) {
	r, err := call(ctx, a, "get", path, func() (statRes, error) {
		d, st, w, err := a.zc.GetW(path)
		return statRes{data: d, st: statOf(st), w: w}, err
	})
	if err != nil {
		return nil, vocab.Stat{}, nil, err
	}
	return r.data, r.st, oneShot(r.w), nil
}

// Set implements recipes.Conn.
func (a *Conn) Set(ctx context.Context, path string, data []byte, version int32) (vocab.Stat, error) {
	r, err := call(ctx, a, "set", path, func() (statRes, error) {
		st, err := a.zc.Set(path, data, version)
		return statRes{st: statOf(st)}, err
	})
	return r.st, err
}

// Children implements recipes.Conn.
func (a *Conn) Children(ctx context.Context, path string) ([]string, vocab.Stat, error) {
	r, err := call(ctx, a, "children", path, func() (statRes, error) {
		k, st, err := a.zc.Children(path)
		return statRes{kids: k, st: statOf(st)}, err
	})
	return r.kids, r.st, err
}

// ChildrenW implements recipes.Conn.
func (a *Conn) ChildrenW(ctx context.Context, path string) ([]string, vocab.Stat, <-chan recipes.Event, error) {
	r, err := call(ctx, a, "children", path, func() (statRes, error) {
		k, st, w, err := a.zc.ChildrenW(path)
		return statRes{kids: k, st: statOf(st), w: w}, err
	})
	if err != nil {
		return nil, vocab.Stat{}, nil, err
	}
	return r.kids, r.st, oneShot(r.w), nil
}

// Multi implements recipes.Conn.
func (a *Conn) Multi(ctx context.Context, ops ...recipes.Op) ([]recipes.OpResult, error) {
	zops := make([]any, len(ops))
	paths := make([]string, len(ops))
	for i, op := range ops {
		switch o := op.(type) {
		case recipes.CreateOp:
			zops[i], paths[i] = &zk.CreateRequest{Path: o.Path, Data: o.Data, Acl: aclOf(o.ACL), Flags: int32(o.Mode)}, o.Path
		case recipes.DeleteOp:
			zops[i], paths[i] = &zk.DeleteRequest{Path: o.Path, Version: o.Version}, o.Path
		case recipes.SetDataOp:
			zops[i], paths[i] = &zk.SetDataRequest{Path: o.Path, Data: o.Data, Version: o.Version}, o.Path
		case recipes.CheckOp:
			zops[i], paths[i] = &zk.CheckVersionRequest{Path: o.Path, Version: o.Version}, o.Path
		default:
			return nil, &vocab.Error{Code: vocab.BadArguments, Op: "multi"}
		}
	}
	type multiRes struct {
		res []zk.MultiResponse
	}
	// call hands back no value with an error, so the results of a multi
	// that failed come this way: written before call receives the error,
	// read only after it returned that error (not on a context's end).
	var failed []zk.MultiResponse
	r, err := call(ctx, a, "multi", "", func() (multiRes, error) {
		res, err := a.zc.Multi(zops...)
		if err == nil {
			for _, x := range res {
				if x.Error != nil {
					err = x.Error
					break
				}
			}
		}
		if err != nil {
			failed = res // go-zookeeper returns the per-op results with the error
		}
		return multiRes{res}, err
	})
	if err != nil {
		// Name the operation that failed, as coord's client does (it
		// named none before: call returns no results with an error).
		var fe *vocab.Error
		if errors.As(err, &fe) && ctx.Err() == nil {
			for i, x := range failed {
				if c, ok := codeOf(x.Error); ok && x.Error != nil && c == fe.Code && i < len(paths) {
					fe.Path = paths[i]
					break
				}
			}
		}
		return nil, err
	}
	out := make([]recipes.OpResult, len(r.res))
	for i, x := range r.res {
		out[i] = recipes.OpResult{Path: x.String, Stat: statOf(x.Stat)}
	}
	return out, nil
}

// AddWatch implements recipes.Conn: go-zookeeper v1.0.4 has no persistent
// watches.
func (a *Conn) AddWatch(ctx context.Context, path string, recursive bool) (<-chan recipes.Event, error) {
	return nil, recipes.ErrUnsupported
}

// RemoveWatch implements recipes.Conn.
func (a *Conn) RemoveWatch(ctx context.Context, path string, recursive bool) error {
	return recipes.ErrUnsupported
}

// oneShot turns a go-zookeeper watch channel into a recipes one.
func oneShot(w <-chan zk.Event) <-chan recipes.Event {
	if w == nil {
		return nil
	}
	out := make(chan recipes.Event, 1)
	go func() {
		defer close(out)
		ev, ok := <-w
		switch {
		case !ok:
			out <- recipes.Event{Type: recipes.EventNotWatching}
		case ev.Type == zk.EventNotWatching:
			e := ev.Err
			if code, ok := codeOf(e); ok {
				e = &vocab.Error{Code: code, Path: ev.Path}
			}
			out <- recipes.Event{Type: recipes.EventNotWatching, Path: ev.Path, Err: e}
		default:
			out <- recipes.Event{Type: vocab.EventType(ev.Type), Path: ev.Path}
		}
	}()
	return out
}
