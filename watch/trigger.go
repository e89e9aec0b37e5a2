package watch

import (
	"slices"
	"strings"

	"coord/fsm"
	"coord/vocab"
)

// Trigger fires the watches a committed change t matches and returns the
// events to deliver, one per session at most, in ascending session id order.
// Matching one-shot watches are removed. The caller passes every trigger of
// every applied entry, in apply order, before readers can see that entry's
// state.
func (r *Registry) Trigger(t fsm.Trigger) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.remember(t)
	ids := r.scratch[:0]
	ws := r.ws[:0]
	if id, e := r.lookup(t.Path); e != nil {
		ws = r.appendWatchers(ws, e)
		if !r.holds(e, survivors(t.Type)) {
			// Every watcher here is one-shot and fires (the common case):
			// forget the whole path at once.
			for _, w := range ws {
				ids = append(ids, w.session)
				r.account(e, w.kinds, -1)
				r.released(w.session, w.kinds)
			}
			r.pairs -= len(ws)
			r.free(id)
		} else {
			for _, w := range ws {
				fire, c := fires(w.kinds, t.Type)
				if fire {
					ids = append(ids, w.session)
				}
				if c != 0 {
					r.drop(w.session, id, w.kinds, c)
				}
			}
		}
	}
	if r.nrec > 0 && reachesDescendants(t.Type) {
		for p, ok := parent(t.Path); ok; p, ok = parent(p) {
			_, e := r.lookup(p)
			if e == nil || !r.holds(e, kRecursive) {
				continue
			}
			ws = r.appendWatchers(ws[:0], e)
			for _, w := range ws {
				if w.kinds&kRecursive != 0 {
					ids = append(ids, w.session)
				}
			}
		}
	}
	r.ws = keep(ws)
	r.compact()
	r.scratch = keep(ids)
	if len(ids) == 0 {
		return nil
	}
	// A session matched by several watches (a one-shot and a persistent one,
	// or recursive ones on several ancestors) gets one event, as ZooKeeper
	// collects the watchers of one trigger in a set and suppresses, for
	// NodeDeleted, the child-table watchers already notified from the data
	// table.
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make([]Event, len(ids))
	for i, s := range ids {
		out[i] = Event{Session: s, Path: t.Path, Type: t.Type, Zxid: t.Zxid}
	}
	return out
}

// keep returns s emptied for reuse, or nil if it grew too large to keep.
func keep[T any](s []T) []T {
	if cap(s) > 4096 {
		return nil
	}
	return s[:0]
}

// fires reports whether kinds k held on the changed path itself fire for an
// event of type typ, and which of them, the one-shot ones, it consumes.
// ZooKeeper keeps two tables: data watches, persistent and recursive watches
// in one, fired by NodeCreated, NodeDataChanged and NodeDeleted; child and
// persistent watches in the other, fired by NodeChildrenChanged and
// NodeDeleted.
func fires(k kind, typ vocab.EventType) (fire bool, consume kind) {
	switch typ {
	case vocab.EventNodeCreated, vocab.EventNodeDataChanged:
		return k&(kData|kPersistent|kRecursive) != 0, k & kData
	case vocab.EventNodeDeleted:
		return k != 0, k & (kData | kChild)
	case vocab.EventNodeChildrenChanged:
		return k&(kChild|kPersistent) != 0, k & kChild
	}
	return false, 0
}

// survivors is the set of kinds on the changed path that an event of type
// typ leaves in place.
func survivors(typ vocab.EventType) kind {
	switch typ {
	case vocab.EventNodeCreated, vocab.EventNodeDataChanged:
		return kAll &^ kData
	case vocab.EventNodeDeleted:
		return kAll &^ (kData | kChild)
	case vocab.EventNodeChildrenChanged:
		return kAll &^ kChild
	}
	return kAll
}

// reachesDescendants reports whether recursive watches on the ancestors of a
// changed node fire for typ: they live only in ZooKeeper's data table, which
// NodeChildrenChanged does not consult.
func reachesDescendants(typ vocab.EventType) bool {
	return typ == vocab.EventNodeCreated || typ == vocab.EventNodeDeleted || typ == vocab.EventNodeDataChanged
}

// parent returns the parent of an absolute path, or false for the root (and
// for anything that is not an absolute path).
func parent(p string) (string, bool) {
	if p == "/" {
		return "", false
	}
	switch i := strings.LastIndexByte(p, '/'); {
	case i < 0:
		return "", false
	case i == 0:
		return "/", true
	default:
		return p[:i], true
	}
}

// remember appends t to the trigger history. r.mu is held.
func (r *Registry) remember(t fsm.Trigger) {
	if r.hist == nil {
		r.hist = make([]fsm.Trigger, historyLen)
	}
	if r.count == len(r.hist) {
		r.forgot = r.hist[r.next].Zxid
	} else {
		r.count++
	}
	r.hist[r.next] = t
	r.next = (r.next + 1) % len(r.hist)
}

// newer returns how many remembered triggers have a zxid above asOf (they
// are the newest ones), or ErrViewTooOld if some such trigger was forgotten.
// r.mu is held.
func (r *Registry) newer(asOf int64) (int, error) {
	if r.forgot > asOf {
		return 0, ErrViewTooOld
	}
	n := 0
	for n < r.count && r.histAt(n+1).Zxid > asOf {
		n++
	}
	return n, nil
}

// histAt returns the back-th newest remembered trigger (1 is the newest).
func (r *Registry) histAt(back int) *fsm.Trigger {
	return &r.hist[(r.next-back+len(r.hist))%len(r.hist)]
}

// AddDataAsOf registers a one-shot data watch for a read served from a view
// whose last zxid is asOf. If a change after asOf has already been triggered
// that the watch would have caught, the watch is not registered and the
// event it would have produced is returned instead: the caller sends it
// right after the read's response (a client registers its watcher when the
// response arrives and drops events for watchers it does not know yet).
// ErrViewTooOld asks for the read to be retried on a newer view;
// ErrTooManyWatches says the watch was not registered.
func (r *Registry) AddDataAsOf(session int64, path string, asOf int64) ([]Event, error) {
	return r.addAsOf(session, path, kData, asOf)
}

// AddChildAsOf is AddDataAsOf for a one-shot child watch.
func (r *Registry) AddChildAsOf(session int64, path string, asOf int64) ([]Event, error) {
	return r.addAsOf(session, path, kChild, asOf)
}

func (r *Registry) addAsOf(session int64, path string, k kind, asOf int64) ([]Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.newer(asOf)
	if err != nil {
		return nil, err
	}
	for i := n; i >= 1; i-- {
		t := r.histAt(i)
		if t.Path != path {
			continue
		}
		if fire, _ := fires(k, t.Type); fire {
			return []Event{{Session: session, Path: path, Type: t.Type, Zxid: t.Zxid}}, nil
		}
	}
	return nil, r.add(session, path, k)
}

// MarkGap records that the state advanced through zxid without passing its
// triggers to Trigger, as when the FSM is restored from a snapshot: any
// registration from a view older than zxid then fails with ErrViewTooOld.
// Watches registered before the gap missed its changes; the server should
// drop them (RemoveSession, or the connections) so that their clients
// re-attach and re-register against the new state.
func (r *Registry) MarkGap(zxid int64) {
	r.mu.Lock()
	r.forgot = max(r.forgot, zxid)
	r.mu.Unlock()
}
