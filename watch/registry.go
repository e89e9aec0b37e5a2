package watch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"coord/fsm"
	"coord/vocab"
)

// NoZxid is the Zxid of events that no single change caused: those Reattach
// synthesizes from a node's state (ZooKeeper's WatchedEvent.NO_ZXID).
const NoZxid int64 = -1

// Event is one watch notification due to one session.
type Event struct {
	Session int64
	Path    string // the changed node (a descendant of the watched path for recursive watches)
	Type    vocab.EventType
	Zxid    int64 // the change's zxid, or NoZxid
}

// Errors returned by the registry.
var (
	// ErrBadMode: an addWatch mode other than 0 and 1.
	ErrBadMode = errors.New("watch: unsupported addWatch mode")
	// ErrViewTooOld: the registry no longer remembers every change made after
	// the given view; read a newer view and try again.
	ErrViewTooOld = errors.New("watch: view older than the trigger history")
	// ErrTooManyWatches: the session already holds its limit of watches
	// (NewLimited); the watch was not registered.
	ErrTooManyWatches = errors.New("watch: the session holds its limit of watches")
)

// kind is a set of watch kinds one session holds on one path.
type kind uint8

const (
	kData kind = 1 << iota
	kChild
	kPersistent
	kRecursive
	kAll = kData | kChild | kPersistent | kRecursive
)

// maskOf is the set of kinds t selects (ZooKeeper 3.9's DataTree.removeWatch
// and containsWatcher: Children and Data match only one-shot watches).
func maskOf(t vocab.WatcherType) kind {
	switch t {
	case vocab.WatcherChildren:
		return kChild
	case vocab.WatcherData:
		return kData
	case vocab.WatcherAny:
		return kAll
	case vocab.WatcherPersistent:
		return kPersistent
	case vocab.WatcherPersistentRecursive:
		return kRecursive
	}
	return 0
}

// historyLen is how many triggers the registry remembers for registrations
// made from views older than its latest trigger.
const historyLen = 4096

// Registry is a server's watch registry. It is safe for concurrent use: reads
// register watches from many goroutines while the apply goroutine triggers.
type Registry struct {
	mu         sync.Mutex
	paths      map[string]uint32 // path -> index in ents
	ents       []entry
	freeEnts   []uint32 // free indexes in ents
	crowds     []*crowd
	freeCrowds []uint32 // free indexes in crowds
	spare      []*crowd // emptied crowds for reuse
	sessions   map[int64]*sessionIDs
	pairs      int // (session, path) pairs holding at least one kind
	n          int // registered watches, each kind counted once
	nrec       int // recursive watches
	scratch    []int64
	// maxPerSession bounds the watches one session may hold (0: no
	// bound); only then does sessionIDs.held count them.
	maxPerSession int
	ws            []watcher // Trigger's copy of a path's watchers

	// The trigger history: a ring of the last historyLen triggers, in the
	// order Trigger saw them.
	hist   []fsm.Trigger
	next   int   // slot of the next trigger
	count  int   // triggers held
	forgot int64 // newest zxid evicted from the ring
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{
		paths:    map[string]uint32{},
		sessions: map[int64]*sessionIDs{},
		forgot:   math.MinInt64,
	}
}

// NewLimited returns an empty registry in which one session may hold at
// most maxPerSession watches (0: no bound, as New), each kind a session
// holds on a path counted once, as Len counts them. A registration past the
// bound fails with ErrTooManyWatches and registers nothing; registering a
// watch the session already holds always succeeds. Keeping the count costs
// Trigger a map lookup per fired one-shot watcher, so New leaves it off.
func NewLimited(maxPerSession int) *Registry {
	r := New()
	r.maxPerSession = max(maxPerSession, 0)
	return r
}

// AddData registers a one-shot data watch: the server calls it for getData
// on an existing node, and for exists whether or not the node exists (so a
// watch set on a missing node fires NodeCreated). It suits a caller that
// registers in step with Trigger; a read served from a view uses
// AddDataAsOf. It fails only with ErrTooManyWatches.
func (r *Registry) AddData(session int64, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.add(session, path, kData)
}

// AddChild registers a one-shot child watch (getChildren on an existing
// node). It fails only with ErrTooManyWatches.
func (r *Registry) AddChild(session int64, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.add(session, path, kChild)
}

// AddWatch registers a persistent (mode 0) or persistent-recursive (mode 1)
// watch, as ZooKeeper's addWatch. It fires nothing at once. It fails with
// ErrBadMode or ErrTooManyWatches.
func (r *Registry) AddWatch(session int64, path string, mode vocab.AddWatchMode) error {
	var k kind
	switch mode {
	case vocab.AddWatchPersistent:
		k = kPersistent
	case vocab.AddWatchPersistentRecursive:
		k = kRecursive
	default:
		return fmt.Errorf("%w: %d", ErrBadMode, int32(mode))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.add(session, path, k)
}

// RemoveSession drops every watch of the session (its connection closed,
// the session ended or moved to another server).
func (r *Registry) RemoveSession(session int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.sessions[session]
	if sp == nil {
		return
	}
	delete(r.sessions, session)
	for _, id := range sp.ids {
		if k := r.kindsOf(&r.ents[id], session); k != 0 {
			r.drop(session, id, k, k)
		}
	}
	r.compact()
}

// Remove drops the session's watches on path that which selects
// (removeWatches) and reports whether there was any: ZooKeeper answers
// NoWatcher otherwise. As in ZooKeeper 3.9, Children and Data remove only
// one-shot watches; a persistent watch goes with Persistent or Any, a
// recursive one with PersistentRecursive or Any. An invalid which matches
// nothing.
func (r *Registry) Remove(session int64, path string, which vocab.WatcherType) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, e := r.lookup(path)
	if e == nil {
		return false
	}
	k := r.kindsOf(e, session)
	c := k & maskOf(which)
	if c == 0 {
		return false
	}
	r.drop(session, id, k, c)
	r.compact()
	return true
}

// Contains reports whether the session holds a watch on path that which
// selects (checkWatches), with Remove's matching rules.
func (r *Registry) Contains(session int64, path string, which vocab.WatcherType) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, e := r.lookup(path)
	return e != nil && r.kindsOf(e, session)&maskOf(which) != 0
}

// Stats returns the numbers of the four-letter word wchs: sessions with at
// least one watch, watched paths, and (session, path) pairs. Unlike
// ZooKeeper's wchs, which reports only its data-watch table, it counts every
// kind of watch.
func (r *Registry) Stats() (connections, paths, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s, sp := range r.sessions {
		if r.watching(s, sp) {
			connections++
		}
	}
	return connections, len(r.paths), r.pairs
}

// Len is the number of registered watches, each kind a session holds on a
// path counted once (ZooKeeper's watch_count counts a persistent watch twice,
// once in each of its two tables).
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// SessionCount is the number of watches the session holds, each kind it
// holds on a path counted once, as Len counts them (and as
// MaxWatchesPerSession bounds them). With a bound the registry keeps the
// count; without one it sweeps the session's list (as BySession does),
// which costs a sort of the session's own list, not a look at every path.
func (r *Registry) SessionCount(session int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.sessions[session]
	if sp == nil {
		return 0
	}
	if r.maxPerSession > 0 {
		return sp.held
	}
	if r.sweep(session, sp) == 0 {
		return 0
	}
	n := 0
	for _, id := range sp.ids {
		n += nkinds(r.kindsOf(&r.ents[id], session))
	}
	return n
}

// BySession returns each watching session's watched paths, sorted (wchc).
func (r *Registry) BySession() map[int64][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64][]string, len(r.sessions))
	for s, sp := range r.sessions {
		if r.sweep(s, sp) == 0 {
			continue
		}
		ps := make([]string, len(sp.ids))
		for i, id := range sp.ids {
			ps[i] = r.ents[id].path
		}
		slices.Sort(ps)
		out[s] = ps
	}
	return out
}

// ByPath returns each watched path's watching sessions, sorted (wchp).
func (r *Registry) ByPath() map[string][]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]int64, len(r.paths))
	for p, id := range r.paths {
		ws := r.appendWatchers(nil, &r.ents[id])
		ids := make([]int64, len(ws))
		for i, w := range ws {
			ids[i] = w.session
		}
		slices.Sort(ids)
		out[p] = ids
	}
	return out
}
