// Package coordconn adapts coord's Go client (package client) to the
// recipes.Conn interface, so the recipes run on a coord cluster over gRPC.
//
// The adapter follows the client's session events: Connected at first,
// Disconnected becomes recipes.StateSuspended, the next Connected
// StateReconnected, Expired and AuthFailed StateExpired, Closed StateClosed.
// It keeps one goroutine reading the session events (it ends with the
// session) and one per pending watch that turns the client's events into
// recipes.Events (it ends when the watch fires or the session ends).
package coordconn

import (
	"context"
	"errors"

	"coord/client"
	"coord/recipes"
	"coord/vocab"
)

// Conn is a recipes.Conn on a *client.Conn.
type Conn struct {
	c       *client.Conn
	tracker *recipes.SessionTracker
	done    chan struct{}
}

var _ recipes.Conn = (*Conn)(nil)

// New adapts c; events is the channel client.Connect returned with it,
// which the adapter reads from now on.
func New(c *client.Conn, events <-chan client.Event) *Conn {
	a := &Conn{c: c, tracker: recipes.NewSessionTracker(), done: make(chan struct{})}
	go a.follow(events)
	return a
}

// Connect opens a session on the coord servers (gRPC addresses) and
// adapts it.
func Connect(ctx context.Context, servers []string, opts ...client.Option) (*Conn, error) {
	c, events, err := client.Connect(ctx, servers, opts...)
	if err != nil {
		return nil, err
	}
	return New(c, events), nil
}

// Client is the underlying client.
func (a *Conn) Client() *client.Conn { return a.c }

// Close ends the session, as zkconn's Close does: while the connection is
// suspended the close waits for the session to re-attach (or for ctx), then
// the server closes the session, which deletes its ephemerals at once, and
// Close waits until the adapter's goroutine is done. Whatever the outcome the
// Conn is finished afterwards: State is StateClosed (or stays StateExpired)
// and calls return recipes.ErrClosed.
//
// It returns nil when the server closed the session, and also for a Conn
// already closed or expired (Close is idempotent and safe to call
// concurrently). It returns an error wrapping ctx.Err() when ctx ends first:
// the session may then live on, with its ephemerals, until it times out.
func (a *Conn) Close(ctx context.Context) error {
	err := a.c.Close(ctx)
	<-a.done
	return mapErr(err)
}

func (a *Conn) follow(events <-chan client.Event) {
	defer close(a.done)
	suspended := false
	for ev := range events {
		switch ev.State {
		case client.StateDisconnected:
			suspended = true
			a.tracker.Set(recipes.StateSuspended)
		case client.StateConnected:
			if suspended {
				suspended = false
				a.tracker.Set(recipes.StateReconnected)
			}
		case client.StateExpired, client.StateAuthFailed:
			a.tracker.Set(recipes.StateExpired)
		case client.StateClosed:
			a.tracker.Set(recipes.StateClosed)
		}
	}
	// The channel closes only when the session has ended.
	if st, _ := a.tracker.State(); st.Live() {
		a.tracker.Set(recipes.StateClosed)
	}
}

// State implements recipes.Conn.
func (a *Conn) State() (recipes.SessionState, <-chan struct{}) { return a.tracker.State() }

// SessionID implements recipes.Conn.
func (a *Conn) SessionID() int64 { return a.c.SessionID() }

// mapErr turns the client's ErrClosed into recipes.ErrClosed; *vocab.Error
// values pass unchanged.
func mapErr(err error) error {
	if err != nil && errors.Is(err, client.ErrClosed) && !errors.Is(err, recipes.ErrClosed) {
		return errors.Join(recipes.ErrClosed, err)
	}
	return err
}

// Create implements recipes.Conn.
func (a *Conn) Create(ctx context.Context, path string, data []byte, mode vocab.CreateMode, acl []vocab.ACL) (string, error) {
	p, err := a.c.Create(ctx, path, data, mode, acl)
	return p, mapErr(err)
}

// Delete implements recipes.Conn.
func (a *Conn) Delete(ctx context.Context, path string, version int32) error {
	return mapErr(a.c.Delete(ctx, path, version))
}

// Exists implements recipes.Conn.
func (a *Conn) Exists(ctx context.Context, path string) (bool, vocab.Stat, error) {
	ok, st, err := a.c.Exists(ctx, path)
	return ok, st, mapErr(err)
}

// ExistsW implements recipes.Conn.
func (a *Conn) ExistsW(ctx context.Context, path string) (bool, vocab.Stat, <-chan recipes.Event, error) {
	ok, st, w, err := a.c.ExistsW(ctx, path)
	return ok, st, oneShot(w), mapErr(err)
}

// Get implements recipes.Conn.
func (a *Conn) Get(ctx context.Context, path string) ([]byte, vocab.Stat, error) {
	d, st, err := a.c.Get(ctx, path)
	return d, st, mapErr(err)
}

// GetW implements recipes.Conn.
func (a *Conn) GetW(ctx context.Context, path string) ([]byte, vocab.Stat, <-chan recipes.Event, error) {
	d, st, w, err := a.c.GetW(ctx, path)
	return d, st, oneShot(w), mapErr(err)
}

// Set implements recipes.Conn.
func (a *Conn) Set(ctx context.Context, path string, data []byte, version int32) (vocab.Stat, error) {
	st, err := a.c.Set(ctx, path, data, version)
	return st, mapErr(err)
}

// Children implements recipes.Conn.
func (a *Conn) Children(ctx context.Context, path string) ([]string, vocab.Stat, error) {
	k, st, err := a.c.Children(ctx, path)
	return k, st, mapErr(err)
}

// ChildrenW implements recipes.Conn.
func (a *Conn) ChildrenW(ctx context.Context, path string) ([]string, vocab.Stat, <-chan recipes.Event, error) {
	k, st, w, err := a.c.ChildrenW(ctx, path)
	return k, st, oneShot(w), mapErr(err)
}

// Multi implements recipes.Conn.
func (a *Conn) Multi(ctx context.Context, ops ...recipes.Op) ([]recipes.OpResult, error) {
	cops := make([]client.Op, len(ops))
	for i, op := range ops {
		switch o := op.(type) {
		case recipes.CreateOp:
			cops[i] = client.CreateOp{Path: o.Path, Data: o.Data, Mode: o.Mode, ACL: o.ACL}
		case recipes.DeleteOp:
			cops[i] = client.DeleteOp{Path: o.Path, Version: o.Version}
		case recipes.SetDataOp:
			cops[i] = client.SetDataOp{Path: o.Path, Data: o.Data, Version: o.Version}
		case recipes.CheckOp:
			cops[i] = client.CheckOp{Path: o.Path, Version: o.Version}
		default:
			return nil, &vocab.Error{Code: vocab.BadArguments, Op: "multi"}
		}
	}
	res, err := a.c.Multi(ctx, cops...)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]recipes.OpResult, len(res))
	for i, r := range res {
		out[i] = recipes.OpResult{Path: r.Path, Stat: r.Stat}
	}
	return out, nil
}

// AddWatch implements recipes.Conn with the client's persistent watches.
func (a *Conn) AddWatch(ctx context.Context, path string, recursive bool) (<-chan recipes.Event, error) {
	w, err := a.c.AddWatch(ctx, path, recursive)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make(chan recipes.Event, 64)
	go func() {
		defer close(out)
		for ev := range w {
			switch ev.Type {
			case client.EventSession:
				continue // the tracker reports session changes
			case client.EventNotWatching:
				out <- recipes.Event{Type: recipes.EventNotWatching, Path: ev.Path, Err: mapErr(ev.Err)}
				// The client closes w next; drain it so this goroutine ends.
			default:
				out <- recipes.Event{Type: ev.Type, Path: ev.Path}
			}
		}
	}()
	return out, nil
}

// RemoveWatch implements recipes.Conn.
func (a *Conn) RemoveWatch(ctx context.Context, path string, recursive bool) error {
	which := vocab.WatcherPersistent
	if recursive {
		which = vocab.WatcherPersistentRecursive
	}
	err := a.c.RemoveWatches(ctx, path, which)
	if errors.Is(err, vocab.NoWatcher) {
		return nil
	}
	return mapErr(err)
}

// oneShot turns a client watch channel into a recipes one.
func oneShot(w <-chan client.Event) <-chan recipes.Event {
	if w == nil {
		return nil
	}
	out := make(chan recipes.Event, 1)
	go func() {
		defer close(out)
		ev, ok := <-w
		if !ok {
			out <- recipes.Event{Type: recipes.EventNotWatching}
			return
		}
		if ev.Type == client.EventNotWatching {
			out <- recipes.Event{Type: recipes.EventNotWatching, Path: ev.Path, Err: mapErr(ev.Err)}
			return
		}
		out <- recipes.Event{Type: ev.Type, Path: ev.Path}
	}()
	return out
}
