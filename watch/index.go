package watch

import (
	"math/bits"
	"slices"
)

// The storage, laid out for memory: a server may hold hundreds of thousands
// of watches, most of them one session's exists watch on one node of its
// own, so the common case costs one map slot, one arena entry and four bytes
// of the session's list, besides the path string itself.
//
// paths maps each watched path to an entry in the arena ents; the entry
// keeps the path (the same string as the map key: a path is stored once) and
// the path's watchers, which is the truth: which session holds which kinds.
// A path with one watcher holds it inline; a path with several holds them in
// a crowd, an unsorted list that turns into a map once it passes crowdList.
// Freed entries and crowds go on free lists, and the arenas are compacted
// when most of them are free.
//
// sessions lists, per session, the ids of the entries it holds a watch on,
// so that RemoveSession need not scan every path. The list is a superset: it
// may also list entries whose one-shot watches have since fired, list an id
// twice, or list an id since reused for another path, which is harmless, as
// a listed entry the session holds nothing on is skipped. Keeping it exact
// would make Trigger touch every notified session's list, a cache miss per
// watcher on the apply goroutine's path; instead a session's list is swept
// (and deduplicated) when it has doubled since its last sweep (on the
// reader's path, in add), and by BySession. A session's list so holds at
// most about twice the watches it held at its peak, and goes with
// RemoveSession.

// watcher is one session's kinds on one path.
type watcher struct {
	session int64
	kinds   kind
}

// entry is one watched path: its string and its watchers. A free entry has
// neither kinds nor crowd. 32 bytes.
type entry struct {
	path    string
	session int64  // the only watcher, when crowd is 0
	kinds   kind   // its kinds
	crowd   uint32 // 1 + the index in Registry.crowds of the watchers, or 0
}

// crowd is the watchers of a path watched by two sessions or more.
type crowd struct {
	list []watcher      // the watchers while m is nil, unsorted
	m    map[int64]kind // the watchers once they passed crowdList
	// held counts the sessions holding each kind (index: bit number), so
	// that Trigger knows beforehand whether a change empties the path and
	// whether a recursive watch is here to be found.
	held [4]int32
}

// crowdList is the most watchers a crowd keeps in its list.
const crowdList = 16

// recycleMax bounds the emptied crowds kept for reuse (those that never
// needed a map): a path whose one-shot watchers all fire is usually watched
// again at once by the same clients.
const recycleMax = 16

// compactMin is the arena size below which free entries are never compacted.
const compactMin = 1024

func (c *crowd) len() int {
	if c.m != nil {
		return len(c.m)
	}
	return len(c.list)
}

func (c *crowd) get(session int64) kind {
	if c.m != nil {
		return c.m[session]
	}
	for _, w := range c.list {
		if w.session == session {
			return w.kinds
		}
	}
	return 0
}

// set gives the session kinds k (not 0) here.
func (c *crowd) set(session int64, k kind) {
	if c.m != nil {
		c.m[session] = k
		return
	}
	for i := range c.list {
		if c.list[i].session == session {
			c.list[i].kinds = k
			return
		}
	}
	if len(c.list) < crowdList {
		c.list = append(c.list, watcher{session, k})
		return
	}
	c.m = make(map[int64]kind, 2*crowdList)
	for _, w := range c.list {
		c.m[w.session] = w.kinds
	}
	c.m[session] = k
	c.list = nil
}

func (c *crowd) del(session int64) {
	if c.m != nil {
		delete(c.m, session)
		return
	}
	for i := range c.list {
		if c.list[i].session == session {
			last := len(c.list) - 1
			c.list[i] = c.list[last]
			c.list = c.list[:last]
			return
		}
	}
}

// sessionIDs is one session's entry in the session index.
type sessionIDs struct {
	ids   []uint32 // a superset of the entries the session holds watches on
	floor int      // len(ids) after the last sweep
	held  int      // watches held, each kind once; kept only with maxPerSession
}

// kindsOf returns the kinds the session holds on entry e.
func (r *Registry) kindsOf(e *entry, session int64) kind {
	if e.crowd != 0 {
		return r.crowds[e.crowd-1].get(session)
	}
	if e.session == session {
		return e.kinds
	}
	return 0
}

// appendWatchers appends the watchers of entry e to ws, in no particular
// order.
func (r *Registry) appendWatchers(ws []watcher, e *entry) []watcher {
	if e.crowd == 0 {
		if e.kinds != 0 {
			ws = append(ws, watcher{e.session, e.kinds})
		}
		return ws
	}
	c := r.crowds[e.crowd-1]
	if c.m == nil {
		return append(ws, c.list...)
	}
	for s, k := range c.m {
		ws = append(ws, watcher{s, k})
	}
	return ws
}

// nwatchers is the number of sessions watching entry e.
func (r *Registry) nwatchers(e *entry) int {
	if e.crowd != 0 {
		return r.crowds[e.crowd-1].len()
	}
	if e.kinds != 0 {
		return 1
	}
	return 0
}

// holds reports whether some session holds a kind in k on entry e.
func (r *Registry) holds(e *entry, k kind) bool {
	if e.crowd == 0 {
		return e.kinds&k != 0
	}
	c := r.crowds[e.crowd-1]
	for i := range c.held {
		if k&(1<<i) != 0 && c.held[i] > 0 {
			return true
		}
	}
	return false
}

// lookup returns the entry of path, or nil.
func (r *Registry) lookup(path string) (uint32, *entry) {
	id, ok := r.paths[path]
	if !ok {
		return 0, nil
	}
	return id, &r.ents[id]
}

// add gives the session kinds k on path, or fails with ErrTooManyWatches
// and changes nothing if that would take the session past maxPerSession.
// r.mu is held.
func (r *Registry) add(session int64, path string, k kind) error {
	id, e := r.lookup(path)
	var old kind
	if e != nil {
		old = r.kindsOf(e, session)
	}
	nk := k &^ old
	if nk == 0 {
		return nil
	}
	sp := r.sessions[session]
	if r.maxPerSession > 0 {
		held := 0
		if sp != nil {
			held = sp.held
		}
		if held+nkinds(nk) > r.maxPerSession {
			return ErrTooManyWatches
		}
	}
	if e == nil {
		if n := len(r.freeEnts); n > 0 {
			id = r.freeEnts[n-1]
			r.freeEnts = r.freeEnts[:n-1]
		} else {
			id = uint32(len(r.ents))
			r.ents = append(r.ents, entry{})
		}
		e = &r.ents[id]
		e.path = path
		r.paths[path] = id
	}
	switch {
	case e.crowd != 0:
		r.crowds[e.crowd-1].set(session, old|nk)
	case e.kinds == 0 || e.session == session:
		e.session, e.kinds = session, old|nk
	default:
		r.gather(e)
		r.crowds[e.crowd-1].set(session, nk)
	}
	r.account(e, nk, +1)
	if sp == nil {
		sp = &sessionIDs{}
		r.sessions[session] = sp
	}
	if r.maxPerSession > 0 {
		sp.held += nkinds(nk)
	}
	if old != 0 {
		return nil
	}
	r.pairs++
	sp.ids = append(sp.ids, id)
	if len(sp.ids) > 2*sp.floor+8 {
		r.sweep(session, sp)
	}
	return nil
}

// nkinds is the number of kinds in k.
func nkinds(k kind) int { return bits.OnesCount8(uint8(k)) }

// released counts kinds k the session no longer holds, if the registry
// counts them. r.mu is held.
func (r *Registry) released(session int64, k kind) {
	if r.maxPerSession == 0 {
		return
	}
	if sp := r.sessions[session]; sp != nil {
		sp.held -= nkinds(k)
	}
}

// gather moves the inline watcher of entry e into a new crowd.
func (r *Registry) gather(e *entry) {
	var c *crowd
	if n := len(r.spare); n > 0 {
		c = r.spare[n-1]
		r.spare = r.spare[:n-1]
	} else {
		c = &crowd{list: make([]watcher, 0, 2)}
	}
	c.set(e.session, e.kinds)
	for i := range c.held {
		if e.kinds&(1<<i) != 0 {
			c.held[i] = 1
		}
	}
	if n := len(r.freeCrowds); n > 0 {
		e.crowd = r.freeCrowds[n-1] + 1
		r.freeCrowds = r.freeCrowds[:n-1]
		r.crowds[e.crowd-1] = c
	} else {
		r.crowds = append(r.crowds, c)
		e.crowd = uint32(len(r.crowds))
	}
	e.session, e.kinds = 0, 0
}

// scatter frees the crowd of entry e, moving its one watcher left inline,
// so that a path whose crowd of one-shot watchers fired around a persistent
// watch gives back the crowd's memory.
func (r *Registry) scatter(e *entry) {
	c := r.crowds[e.crowd-1]
	if c.m == nil {
		e.session, e.kinds = c.list[0].session, c.list[0].kinds
	} else {
		for s, k := range c.m {
			e.session, e.kinds = s, k
		}
	}
	r.release(e)
}

// release frees the crowd of entry e, keeping small ones for reuse.
func (r *Registry) release(e *entry) {
	i := e.crowd - 1
	c := r.crowds[i]
	e.crowd = 0
	r.crowds[i] = nil
	r.freeCrowds = append(r.freeCrowds, i)
	if c.m == nil && len(r.spare) < recycleMax {
		c.list = c.list[:0]
		c.held = [4]int32{}
		r.spare = append(r.spare, c)
	}
}

// sweep drops from the session's list the entries it no longer holds a
// watch on and the ids listed twice, and the session from the index if none
// is left; it returns how many ids are left.
func (r *Registry) sweep(session int64, sp *sessionIDs) int {
	ids := sp.ids[:0]
	for _, id := range sp.ids {
		if r.kindsOf(&r.ents[id], session) != 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if cap(ids) > 4*len(ids)+16 {
		ids = slices.Clone(ids)
	}
	sp.ids = ids
	sp.floor = len(ids)
	if sp.floor == 0 {
		delete(r.sessions, session)
	}
	return sp.floor
}

// watching reports whether the session holds any watch, dropping it from the
// index if not.
func (r *Registry) watching(session int64, sp *sessionIDs) bool {
	for _, id := range sp.ids {
		if r.kindsOf(&r.ents[id], session) != 0 {
			return true
		}
	}
	delete(r.sessions, session)
	return false
}

// drop takes kinds c from the kinds k the session holds on entry id, and
// forgets the path once no session watches it. The session's list keeps the
// id until its next sweep. r.mu is held; the caller compacts afterwards.
func (r *Registry) drop(session int64, id uint32, k, c kind) {
	e := &r.ents[id]
	r.account(e, c, -1)
	r.released(session, c)
	k &^= c
	switch {
	case e.crowd == 0:
		e.kinds = k
	case k != 0:
		r.crowds[e.crowd-1].set(session, k)
	default:
		cr := r.crowds[e.crowd-1]
		cr.del(session)
		if cr.len() < 2 {
			r.scatter(e)
		}
	}
	if k != 0 {
		return
	}
	r.pairs--
	if e.crowd == 0 && e.kinds == 0 {
		r.free(id)
	}
}

// free forgets the path of entry id, which no session watches any more.
func (r *Registry) free(id uint32) {
	e := &r.ents[id]
	delete(r.paths, e.path)
	if e.crowd != 0 {
		r.release(e)
	}
	*e = entry{}
	r.freeEnts = append(r.freeEnts, id)
}

// account counts kinds k arriving at (delta +1) or leaving (-1) entry e.
func (r *Registry) account(e *entry, k kind, delta int) {
	var held *[4]int32
	if e.crowd != 0 {
		held = &r.crowds[e.crowd-1].held
	}
	for i := range 4 {
		if k&(1<<i) != 0 {
			if held != nil {
				held[i] += int32(delta)
			}
			r.n += delta
		}
	}
	if k&kRecursive != 0 {
		r.nrec += delta
	}
}

// compact rebuilds the arenas and the path map once most entries are free,
// renumbering the entries; Go maps and slices never give memory back by
// themselves. r.mu is held and no id is in use outside the registry.
func (r *Registry) compact() {
	live := len(r.paths)
	if len(r.ents) < compactMin || 4*live > len(r.ents) {
		return
	}
	const gone = ^uint32(0)
	renum := make([]uint32, len(r.ents))
	ents := make([]entry, 0, live)
	var crowds []*crowd
	for old := range r.ents {
		e := r.ents[old]
		if e.crowd == 0 && e.kinds == 0 {
			renum[old] = gone
			continue
		}
		if e.crowd != 0 {
			crowds = append(crowds, r.crowds[e.crowd-1])
			e.crowd = uint32(len(crowds))
		}
		renum[old] = uint32(len(ents))
		ents = append(ents, e)
	}
	paths := make(map[string]uint32, live)
	for i := range ents {
		paths[ents[i].path] = uint32(i)
	}
	r.ents, r.paths, r.crowds = ents, paths, crowds
	r.freeEnts, r.freeCrowds = nil, nil
	for s, sp := range r.sessions {
		ids := sp.ids[:0]
		for _, id := range sp.ids {
			if n := renum[id]; n != gone {
				ids = append(ids, n)
			}
		}
		sp.ids = ids
		r.sweep(s, sp)
	}
}
