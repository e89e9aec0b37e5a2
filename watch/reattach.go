package watch

import (
	"fmt"

	"coord/fsm"
	"coord/vocab"
)

// LimitError is Reattach's error when the session's bound left Refused of
// the Of watches it was given unregistered. It wraps ErrTooManyWatches.
type LimitError struct{ Refused, Of int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("%v: %d of %d watches not registered", ErrTooManyWatches, e.Refused, e.Of)
}

func (e *LimitError) Unwrap() error { return ErrTooManyWatches }

// WatchSet is what a client re-registers when it re-attaches its session
// (ZooKeeper's SetWatches and SetWatches2): the paths of its outstanding
// watches by kind, in the order it sends them.
type WatchSet struct {
	DataWatches                []string // getData watches
	ExistWatches               []string // exists watches (set on missing nodes)
	ChildWatches               []string // getChildren watches
	PersistentWatches          []string // addWatch mode 0
	PersistentRecursiveWatches []string // addWatch mode 1
}

// Reattach re-registers a re-attaching session's watches against view v, as
// ZooKeeper's DataTree.setWatches does, given relativeZxid, the last zxid the
// client saw. It returns the events to send at once, in ZooKeeper's order:
//   - for each data watch, NodeDeleted if the node is gone, NodeDataChanged
//     if its mzxid is above relativeZxid, else the watch is registered;
//   - then for each exist watch, NodeCreated if the node exists, else the
//     watch is registered as a data watch;
//   - then for each child watch, NodeDeleted if the node is gone,
//     NodeChildrenChanged if its pzxid is above relativeZxid, else the watch
//     is registered;
//   - persistent and persistent-recursive watches are registered and fire
//     nothing.
//
// These events carry NoZxid, as ZooKeeper's do; a path listed twice is
// answered twice, and no ACL is checked. Then, since v may be older than the
// latest trigger (see AddDataAsOf), the triggers after v are replayed against
// the watches just registered, in order, and their events follow, carrying
// their change's zxid, one per trigger; one-shot watches they fire are not
// registered. The caller sends all of them before its reply to setWatches,
// as ZooKeeper does (the client's watchers survive the reconnection, so it
// knows them already). On ErrViewTooOld nothing is registered and the caller
// retries with a newer view.
//
// With a bound per session (NewLimited), the watches are registered in the
// order the client listed them (a path's kinds together) while they fit;
// the rest are not, and Reattach returns the events with an error wrapping
// ErrTooManyWatches (a *LimitError) that counts them. A client can only list more than the
// bound if a server with a higher bound accepted them, or by forging its
// list.
func (r *Registry) Reattach(v *fsm.View, session int64, relativeZxid int64, w WatchSet) ([]Event, error) {
	var out []Event
	synth := func(path string, typ vocab.EventType) {
		out = append(out, Event{Session: session, Path: path, Type: typ, Zxid: NoZxid})
	}
	pending := make(map[string]kind)
	type watchKind struct {
		path string
		k    kind
	}
	var order []watchKind // pending's watches in the client's order
	want := func(p string, k kind) {
		if pending[p]&k == 0 {
			order = append(order, watchKind{p, k})
		}
		pending[p] |= k
	}
	for _, p := range w.DataWatches {
		st, err := v.Exists(p)
		switch {
		case err != nil:
			synth(p, vocab.EventNodeDeleted)
		case st.Mzxid > relativeZxid:
			synth(p, vocab.EventNodeDataChanged)
		default:
			want(p, kData)
		}
	}
	for _, p := range w.ExistWatches {
		if _, err := v.Exists(p); err == nil {
			synth(p, vocab.EventNodeCreated)
		} else {
			want(p, kData)
		}
	}
	for _, p := range w.ChildWatches {
		st, err := v.Exists(p)
		switch {
		case err != nil:
			synth(p, vocab.EventNodeDeleted)
		case st.Pzxid > relativeZxid:
			synth(p, vocab.EventNodeChildrenChanged)
		default:
			want(p, kChild)
		}
	}
	for _, p := range w.PersistentWatches {
		want(p, kPersistent)
	}
	recursive := false
	for _, p := range w.PersistentRecursiveWatches {
		want(p, kRecursive)
		recursive = true
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.newer(int64(v.LastZxid()))
	if err != nil {
		return nil, err
	}
	for i := n; i >= 1 && len(pending) > 0; i-- {
		t := r.histAt(i)
		fired := false
		if k, ok := pending[t.Path]; ok {
			var c kind
			fired, c = fires(k, t.Type)
			if k &^= c; k == 0 {
				delete(pending, t.Path)
			} else {
				pending[t.Path] = k
			}
		}
		if !fired && recursive && reachesDescendants(t.Type) {
			for p, ok := parent(t.Path); ok && !fired; p, ok = parent(p) {
				fired = pending[p]&kRecursive != 0
			}
		}
		if fired {
			out = append(out, Event{Session: session, Path: t.Path, Type: t.Type, Zxid: t.Zxid})
		}
	}
	refused := 0
	for _, w := range order {
		if pending[w.path]&w.k != 0 && r.add(session, w.path, w.k) != nil {
			refused++
		}
	}
	if refused > 0 {
		return out, &LimitError{Refused: refused, Of: len(order)}
	}
	return out, nil
}
