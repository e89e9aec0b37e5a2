package recipes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"coord/vocab"
)

// changeNotifier is a value's "changed" channel: closed and replaced at
// every change, so any number of readers follow it without a goroutine.
type changeNotifier struct {
	ch chan struct{}
}

func (n *changeNotifier) fire() {
	if n.ch != nil {
		close(n.ch)
	}
	n.ch = make(chan struct{})
}

// follower is what both caches share: the Conn, the path they follow, the
// persistent watch where the Conn has them, the "changed" notifier, why the
// cache stopped, and the goroutine that follows the path.
type follower struct {
	c          Conn
	path       string // NodeCache: its node; TreeCache: the subtree's root
	recursive  bool
	persistent bool
	w          <-chan Event

	mu      sync.Mutex // guards the cache's copy as well
	changed changeNotifier
	err     error

	cancel context.CancelFunc
	done   chan struct{}
}

func (f *follower) init(c Conn, path string, recursive bool) {
	f.c, f.path, f.recursive, f.done = c, path, recursive, make(chan struct{})
	f.changed.fire()
}

// watch adds the persistent (or persistent-recursive) watch where the Conn
// has them; without, the cache sets one-shot watches as it reads.
func (f *follower) watch(ctx context.Context) error {
	w, err := f.c.AddWatch(ctx, f.path, f.recursive)
	switch {
	case err == nil:
		f.persistent, f.w = true, w
	case !errors.Is(err, ErrUnsupported):
		return err
	}
	return nil
}

// abandon removes the persistent watch of a cache whose first load failed.
func (f *follower) abandon(ctx context.Context) {
	if f.persistent {
		_ = f.c.RemoveWatch(context.WithoutCancel(ctx), f.path, f.recursive)
	}
}

// start runs the cache's follow loop until Close; run closes f.done.
func (f *follower) start(run func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go run(ctx)
}

func (f *follower) stop(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	f.changed.fire()
}

// Changed returns a channel closed at the next change of the copy (or when
// the cache stops).
func (f *follower) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed.ch
}

// Err says why the cache stopped following (nil while it runs).
func (f *follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Persistent reports whether the cache runs on a persistent watch
// (persistent-recursive for a TreeCache).
func (f *follower) Persistent() bool { return f.persistent }

// Close stops the cache and removes its persistent watch.
func (f *follower) Close(ctx context.Context) error {
	f.cancel()
	<-f.done
	if !f.persistent {
		return nil
	}
	err := f.c.RemoveWatch(ctx, f.path, f.recursive)
	if err == nil {
		for range f.w { // the adapter closes it after EventNotWatching
		}
	}
	if sessionEnded(err) {
		return nil
	}
	return err
}

// NodeCache keeps a local copy of one znode's data and Stat (Curator's
// NodeCache), current from a persistent watch where the Conn has them
// (coord) and from one-shot data/exists watches otherwise (go-zookeeper).
//
// The copy is read on the cache's session after each notification, so it
// is never older than the notification. While the session is suspended the
// copy stays as it was (possibly stale); after a reconnection a persistent
// watch's cache reads the node again (changes made meanwhile are not
// replayed), a one-shot watch's is told by the watch itself. When the
// session expires the cache stops (Err says why) and keeps its last copy.
//
// Two caches with persistent watches on the same path and session share the
// server's watch: closing one ends the other's.
type NodeCache struct {
	follower
	data   []byte // data, stat and exists under mu
	stat   vocab.Stat
	exists bool
}

// NewNodeCache loads path and follows it until Close.
func NewNodeCache(ctx context.Context, c Conn, path string) (*NodeCache, error) {
	n := &NodeCache{}
	n.init(c, path, false)
	if err := n.watch(ctx); err != nil {
		return nil, err
	}
	oneShot, err := n.load(ctx)
	if err != nil {
		n.abandon(ctx)
		return nil, err
	}
	n.start(func(ctx context.Context) { n.run(ctx, oneShot) })
	return n, nil
}

// load reads the node (setting a one-shot watch unless persistent) and
// returns the one-shot watch.
func (n *NodeCache) load(ctx context.Context) (<-chan Event, error) {
	for {
		var data []byte
		var st vocab.Stat
		var w <-chan Event
		var err error
		if n.persistent {
			err = retry(ctx, n.c, func() (err error) {
				data, st, err = n.c.Get(ctx, n.path)
				return err
			})
		} else {
			err = retry(ctx, n.c, func() (err error) {
				data, st, w, err = n.c.GetW(ctx, n.path)
				return err
			})
		}
		exists := err == nil
		if errors.Is(err, vocab.NoNode) {
			if !n.persistent {
				var ok bool
				err = retry(ctx, n.c, func() (err error) {
					ok, _, w, err = n.c.ExistsW(ctx, n.path)
					return err
				})
				if err == nil && ok {
					continue // created meanwhile: read it
				}
			} else {
				err = nil
			}
		}
		if err != nil {
			return nil, err
		}
		n.set(data, st, exists)
		return w, nil
	}
}

func (n *NodeCache) set(data []byte, st vocab.Stat, exists bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if exists == n.exists && st == n.stat {
		return
	}
	n.data, n.stat, n.exists = data, st, exists
	n.changed.fire()
}

func (n *NodeCache) run(ctx context.Context, w <-chan Event) {
	defer close(n.done)
	if n.persistent {
		w = n.w
	}
	for {
		st, changed := n.c.State()
		if !st.Live() {
			n.stop(sessionErr(st))
			return
		}
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w:
			if !ok || ev.Type == EventNotWatching {
				if st, _ := n.c.State(); !st.Live() {
					n.stop(sessionErr(st))
				} else {
					n.stop(errors.New("recipes: node cache watch removed"))
				}
				return
			}
		case <-changed:
			if st, _ := n.c.State(); st != StateReconnected || !n.persistent {
				continue
			}
		}
		nw, err := n.load(ctx)
		if err != nil {
			if ctx.Err() == nil {
				n.stop(err)
			}
			return
		}
		if !n.persistent {
			w = nw
		}
	}
}

// Current returns the cached data and Stat, and whether the node exists.
func (n *NodeCache) Current() ([]byte, vocab.Stat, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.data, n.stat, n.exists
}

// TreeCache keeps a local copy of a subtree (Curator's TreeCache): every
// node's data, Stat and children, current from a persistent-recursive watch
// on the root where the Conn has them (coord, ZooKeeper 3.6+ clients), and
// from a one-shot data and child watch per node otherwise.
//
// After each notification the cache reads the node it names on its own
// session, so the copy is never older than the notification. With a
// persistent-recursive watch, changes made while the session was suspended
// are not replayed: the cache reads the whole subtree again on
// StateReconnected. One-shot watches are re-registered by the adapters and
// need no re-read. When the session expires the cache stops (Err) and keeps
// its last copy. WithDepth limits the levels kept below the root.
type TreeCache struct {
	follower
	depth   int
	events  chan Event // one-shot watches, merged
	stopped chan struct{}
	nodes   map[string]*treeNode // under mu
}

type treeNode struct {
	data []byte
	stat vocab.Stat
	kids map[string]bool
}

// TreeOption configures a TreeCache.
type TreeOption func(*TreeCache)

// WithDepth keeps only depth levels below the root (0: only the root; the
// default is unlimited).
func WithDepth(depth int) TreeOption { return func(t *TreeCache) { t.depth = depth } }

// NewTreeCache loads the subtree at root and follows it until Close.
func NewTreeCache(ctx context.Context, c Conn, root string, opts ...TreeOption) (*TreeCache, error) {
	t := &TreeCache{depth: -1, events: make(chan Event, 64), stopped: make(chan struct{}), nodes: map[string]*treeNode{}}
	t.init(c, root, true)
	for _, o := range opts {
		o(t)
	}
	if err := t.watch(ctx); err != nil {
		return nil, err
	}
	if err := t.load(ctx, root, true, true); err != nil {
		close(t.stopped)
		t.abandon(ctx)
		return nil, err
	}
	t.start(t.run)
	return t, nil
}

func (t *TreeCache) level(path string) int {
	if path == t.path {
		return 0
	}
	rest := strings.TrimPrefix(path, t.path)
	if t.path == "/" {
		rest = "/" + rest
	}
	return strings.Count(rest, "/")
}

// forward passes a one-shot watch's event to the cache's loop.
func (t *TreeCache) forward(w <-chan Event) {
	if w == nil {
		return
	}
	go func() {
		select {
		case ev, ok := <-w:
			if !ok {
				return
			}
			select {
			case t.events <- ev:
			case <-t.stopped:
			}
		case <-t.stopped:
		}
	}()
}

// load reads path's data (if data) and children (if kids), setting one-shot
// watches unless persistent, and loads children it did not know.
func (t *TreeCache) load(ctx context.Context, path string, data, kids bool) error {
	watch := !t.persistent
	if data {
		var d []byte
		var st vocab.Stat
		var w <-chan Event
		err := retry(ctx, t.c, func() (err error) {
			if watch {
				d, st, w, err = t.c.GetW(ctx, path)
			} else {
				d, st, err = t.c.Get(ctx, path)
			}
			return err
		})
		if errors.Is(err, vocab.NoNode) {
			t.remove(path)
			if path == t.path && watch {
				var ok bool
				if err := retry(ctx, t.c, func() (err error) {
					ok, _, w, err = t.c.ExistsW(ctx, path)
					return err
				}); err != nil {
					return err
				}
				t.forward(w)
				if ok {
					return t.load(ctx, path, true, true)
				}
			}
			return nil
		}
		if err != nil {
			return err
		}
		t.forward(w)
		t.mu.Lock()
		n := t.nodes[path]
		if n == nil {
			n = &treeNode{kids: map[string]bool{}}
			t.nodes[path] = n
			if path != t.path {
				if p := t.nodes[parentOf(path)]; p != nil {
					p.kids[baseName(path)] = true
				}
			}
			kids = true
		}
		if n.stat != st || n.data == nil && d != nil {
			n.data, n.stat = d, st
			t.changed.fire()
		}
		t.mu.Unlock()
	}
	if !kids || t.depth >= 0 && t.level(path) >= t.depth {
		return nil
	}
	var names []string
	var w <-chan Event
	err := retry(ctx, t.c, func() (err error) {
		if watch {
			names, _, w, err = t.c.ChildrenW(ctx, path)
		} else {
			names, _, err = t.c.Children(ctx, path)
		}
		return err
	})
	if errors.Is(err, vocab.NoNode) {
		t.remove(path)
		return nil
	}
	if err != nil {
		return err
	}
	t.forward(w)
	t.mu.Lock()
	n := t.nodes[path]
	var added, gone []string
	if n != nil {
		now := map[string]bool{}
		for _, k := range names {
			now[k] = true
			if !n.kids[k] || t.nodes[join(path, k)] == nil {
				added = append(added, k)
			}
		}
		for k := range n.kids {
			if !now[k] {
				gone = append(gone, k)
			}
		}
		n.kids = now
	}
	t.mu.Unlock()
	for _, k := range gone {
		t.remove(join(path, k))
	}
	for _, k := range added {
		if err := t.load(ctx, join(path, k), true, true); err != nil {
			return err
		}
	}
	return nil
}

// remove drops path and its subtree.
func (t *TreeCache) remove(path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.nodes[path]; !ok {
		return
	}
	prefix := path + "/"
	if path == "/" {
		prefix = "/"
	}
	for p := range t.nodes {
		if p == path || strings.HasPrefix(p, prefix) {
			delete(t.nodes, p)
		}
	}
	if p := t.nodes[parentOf(path)]; p != nil && path != t.path {
		delete(p.kids, baseName(path))
	}
	t.changed.fire()
}

func (t *TreeCache) run(ctx context.Context) {
	defer close(t.done)
	defer close(t.stopped)
	for {
		st, changed := t.c.State()
		if !st.Live() {
			t.stop(sessionErr(st))
			return
		}
		var ev Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-t.w: // nil (never ready) without a persistent watch
		case ev, ok = <-t.events:
		case <-changed:
			if st, _ := t.c.State(); st == StateReconnected && t.persistent {
				if err := t.reload(ctx); err != nil {
					if ctx.Err() == nil {
						t.stop(err)
					}
					return
				}
			}
			continue
		}
		if !ok || ev.Type == EventNotWatching {
			if st, _ := t.c.State(); !st.Live() {
				t.stop(sessionErr(st))
				return
			}
			if t.persistent && (!ok || ev.Path == t.path) {
				t.stop(errors.New("recipes: tree cache watch removed"))
				return
			}
			continue
		}
		if err := t.handle(ctx, ev); err != nil {
			if ctx.Err() == nil {
				t.stop(err)
			}
			return
		}
	}
}

func (t *TreeCache) handle(ctx context.Context, ev Event) error {
	if t.depth >= 0 && t.level(ev.Path) > t.depth {
		return nil
	}
	switch ev.Type {
	case vocab.EventNodeDeleted:
		t.remove(ev.Path)
		if ev.Path == t.path && !t.persistent {
			return t.load(ctx, t.path, true, true) // sets an exists watch
		}
		return nil
	case vocab.EventNodeDataChanged:
		return t.load(ctx, ev.Path, true, false)
	case vocab.EventNodeChildrenChanged:
		return t.load(ctx, ev.Path, false, true)
	case vocab.EventNodeCreated:
		if t.persistent && ev.Path != t.path {
			t.mu.Lock()
			_, parentKnown := t.nodes[parentOf(ev.Path)]
			t.mu.Unlock()
			if !parentKnown {
				return nil // loaded with its parent
			}
		}
		return t.load(ctx, ev.Path, true, true)
	}
	return nil
}

// reload reads the whole subtree again (after a suspension, with a
// persistent watch) and drops what is gone.
func (t *TreeCache) reload(ctx context.Context) error {
	t.mu.Lock()
	known := make([]string, 0, len(t.nodes))
	for p := range t.nodes {
		known = append(known, p)
	}
	t.mu.Unlock()
	slices.Sort(known)
	if err := t.load(ctx, t.path, true, true); err != nil {
		return err
	}
	for _, p := range known {
		t.mu.Lock()
		_, still := t.nodes[p]
		t.mu.Unlock()
		if still {
			if err := t.load(ctx, p, true, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// Get returns the cached data and Stat of path, and whether it exists.
func (t *TreeCache) Get(path string) ([]byte, vocab.Stat, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[path]
	if !ok {
		return nil, vocab.Stat{}, false
	}
	return n.data, n.stat, true
}

// Children returns the cached children of path, sorted (nil if path is not
// in the cache).
func (t *TreeCache) Children(path string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[path]
	if !ok {
		return nil
	}
	out := make([]string, 0, len(n.kids))
	for k := range n.kids {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Len is the number of cached nodes.
func (t *TreeCache) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.nodes)
}
