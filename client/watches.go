package client

import (
	"slices"
	"strings"
	"sync"

	"coord/api"
	"coord/vocab"
)

// watchKind is one kind of client-side registration. Data and exist are
// apart, as in ZooKeeper's client, because they are re-registered apart: an
// exist watch was set on a node that did not exist.
type watchKind uint8

const (
	kindData watchKind = iota
	kindExist
	kindChild
	kindPersistent
	kindRecursive
)

type watchKey struct {
	path string
	kind watchKind
}

// watcher is one channel waiting on a registration: one-shot watches use a
// channel with room for their one event, persistent ones an unbounded queue.
type watcher struct {
	once chan Event
	q    *queue
}

func newOneShot() *watcher { return &watcher{once: make(chan Event, 1)} }

func (w *watcher) ch() <-chan Event {
	if w == nil {
		return nil
	}
	if w.q != nil {
		return w.q.out
	}
	return w.once
}

// deliver hands ev to w; for a one-shot watcher (or last set) it is the end.
func (w *watcher) deliver(ev Event, last bool) {
	if w.q != nil {
		w.q.push(ev)
		if last {
			w.q.close()
		}
		return
	}
	w.once <- ev // room for exactly one: a one-shot watcher is delivered once
	close(w.once)
}

// watchTable is the client's registry of watches. The server keeps one
// watch per (session, path, kind) and sends one event per change; the table
// fans that event out to every channel registered for it, and is what the
// client re-registers when it re-attaches.
type watchTable struct {
	mu   sync.Mutex
	m    map[watchKey][]*watcher
	done *Event // set once the session ended: registrations finish at once
}

func newWatchTable() *watchTable { return &watchTable{m: map[watchKey][]*watcher{}} }

func (t *watchTable) add(path string, kind watchKind, w *watcher) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done != nil {
		ev := *t.done
		ev.Path = path
		w.deliver(ev, true)
		return
	}
	k := watchKey{path, kind}
	t.m[k] = append(t.m[k], w)
}

// fire delivers a znode event to the watches it matches, following the
// server's rules (see package watch): one-shot ones are consumed.
func (t *watchTable) fire(ev Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := ev.Path
	var once []watchKind
	switch ev.Type {
	case vocab.EventNodeCreated, vocab.EventNodeDataChanged:
		once = []watchKind{kindData, kindExist}
	case vocab.EventNodeDeleted:
		once = []watchKind{kindData, kindExist, kindChild}
	case vocab.EventNodeChildrenChanged:
		once = []watchKind{kindChild}
	default:
		return
	}
	for _, k := range once {
		key := watchKey{p, k}
		for _, w := range t.m[key] {
			w.deliver(ev, true)
		}
		delete(t.m, key)
	}
	for _, w := range t.m[watchKey{p, kindPersistent}] {
		w.deliver(ev, false)
	}
	if ev.Type == vocab.EventNodeChildrenChanged {
		return
	}
	for a, ok := p, true; ok; a, ok = parent(a) {
		for _, w := range t.m[watchKey{a, kindRecursive}] {
			w.deliver(ev, false)
		}
	}
}

// parent returns the parent of a path, and false for "/" (or a path that is
// not absolute).
func parent(p string) (string, bool) {
	if p == "/" || !strings.HasPrefix(p, "/") {
		return "", false
	}
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", true
	}
	return p[:i], true
}

// kindsOf is the set of kinds a WatcherType selects.
func kindsOf(which vocab.WatcherType) []watchKind {
	switch which {
	case vocab.WatcherChildren:
		return []watchKind{kindChild}
	case vocab.WatcherData:
		return []watchKind{kindData, kindExist}
	case vocab.WatcherAny:
		return []watchKind{kindData, kindExist, kindChild, kindPersistent, kindRecursive}
	case vocab.WatcherPersistent:
		return []watchKind{kindPersistent}
	case vocab.WatcherPersistentRecursive:
		return []watchKind{kindRecursive}
	}
	return nil
}

// has reports whether any watch of the selected kinds is registered on path.
func (t *watchTable) has(path string, which vocab.WatcherType) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range kindsOf(which) {
		if len(t.m[watchKey{path, k}]) > 0 {
			return true
		}
	}
	return false
}

// remove ends the selected watches on path with an EventNotWatching.
func (t *watchTable) remove(path string, which vocab.WatcherType, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev := Event{Type: EventNotWatching, State: StateConnected, Path: path, Err: err}
	for _, k := range kindsOf(which) {
		key := watchKey{path, k}
		for _, w := range t.m[key] {
			w.deliver(ev, true)
		}
		delete(t.m, key)
	}
}

// session passes a session state change to the persistent watches, which
// outlive it.
func (t *watchTable) session(ev Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, ws := range t.m {
		if k.kind == kindPersistent || k.kind == kindRecursive {
			for _, w := range ws {
				w.deliver(ev, false)
			}
		}
	}
}

// finish ends every watch with ev (the session is over) and makes later
// registrations end at once.
func (t *watchTable) finish(ev Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = &ev
	for k, ws := range t.m {
		e := ev
		e.Path = k.path
		for _, w := range ws {
			w.deliver(e, true)
		}
	}
	clear(t.m)
}

// watchSet lists the registered watches for a re-attach, paths sorted.
func (t *watchTable) watchSet(relativeZxid int64) *api.WatchSet {
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := &api.WatchSet{RelativeZxid: relativeZxid}
	for k, list := range t.m {
		if len(list) == 0 {
			continue
		}
		switch k.kind {
		case kindData:
			ws.Data = append(ws.Data, k.path)
		case kindExist:
			ws.Exist = append(ws.Exist, k.path)
		case kindChild:
			ws.Child = append(ws.Child, k.path)
		case kindPersistent:
			ws.Persistent = append(ws.Persistent, k.path)
		case kindRecursive:
			ws.PersistentRecursive = append(ws.PersistentRecursive, k.path)
		}
	}
	for _, s := range [][]string{ws.Data, ws.Exist, ws.Child, ws.Persistent, ws.PersistentRecursive} {
		slices.Sort(s)
	}
	return ws
}
