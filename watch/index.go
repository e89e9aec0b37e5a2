package watch

// The two indexes and their upkeep. paths is the truth: which session holds
// which kinds on which path. sessions lists, per session, the paths it holds
// a watch on, so that RemoveSession need not scan every path; it may also
// list paths whose one-shot watches have since fired. Keeping it exact would
// make Trigger touch every notified session's index, a cache miss per
// watcher on the apply goroutine's path; instead a session's list is swept
// when it has doubled since its last sweep (on the reader's path, in add),
// and by Stats and BySession. A session's list so holds at most about twice
// the watches it held at its peak, and goes with RemoveSession.

// sessionPaths is one session's entry in the session index.
type sessionPaths struct {
	paths map[string]struct{} // a superset of the paths the session watches
	floor int                 // len(paths) after the last sweep
}

// add gives the session kinds k on path. r.mu is held.
func (r *Registry) add(session int64, path string, k kind) {
	e := r.paths[path]
	if e == nil {
		if n := len(r.spare); n > 0 {
			e = r.spare[n-1]
			r.spare = r.spare[:n-1]
		} else {
			e = &entry{kinds: make(map[int64]kind, 1)}
		}
		r.paths[path] = e
	}
	old := e.kinds[session]
	nk := k &^ old
	if nk == 0 {
		return
	}
	e.kinds[session] = old | nk
	r.account(e, nk, +1)
	if len(e.kinds) > recycleMax {
		e.big = true
	}
	if old != 0 {
		return
	}
	r.pairs++
	sp := r.sessions[session]
	if sp == nil {
		sp = &sessionPaths{paths: map[string]struct{}{}}
		r.sessions[session] = sp
	}
	if _, ok := sp.paths[path]; !ok {
		sp.paths[path] = struct{}{}
		if len(sp.paths) > 2*sp.floor+8 {
			r.sweep(session, sp)
		}
	}
}

// holds reports whether the session holds any watch on path.
func (r *Registry) holds(session int64, path string) bool {
	e := r.paths[path]
	return e != nil && e.kinds[session] != 0
}

// sweep drops from the session's list the paths it no longer watches, and
// the session from the index if none is left; it returns how many are left.
func (r *Registry) sweep(session int64, sp *sessionPaths) int {
	for p := range sp.paths {
		if !r.holds(session, p) {
			delete(sp.paths, p)
		}
	}
	sp.floor = len(sp.paths)
	if sp.floor == 0 {
		delete(r.sessions, session)
	}
	return sp.floor
}

// drop takes kinds c from the kinds k the session holds on path, whose
// entry is e, and forgets the path once no session watches it. The session's
// list keeps the path until its next sweep. r.mu is held.
func (r *Registry) drop(session int64, path string, e *entry, k, c kind) {
	r.account(e, c, -1)
	if k &^= c; k != 0 {
		e.kinds[session] = k
		return
	}
	delete(e.kinds, session)
	r.pairs--
	if len(e.kinds) == 0 {
		r.free(path, e)
	}
}

// free forgets the path, whose entry e holds no session, keeping small
// entries for reuse.
func (r *Registry) free(path string, e *entry) {
	delete(r.paths, path)
	if !e.big && len(r.spare) < recycleMax {
		clear(e.kinds)
		e.held = [4]int32{}
		r.spare = append(r.spare, e)
	}
}

// account counts kinds k arriving at (delta +1) or leaving (-1) entry e.
func (r *Registry) account(e *entry, k kind, delta int) {
	for i := range e.held {
		if k&(1<<i) != 0 {
			e.held[i] += int32(delta)
			r.n += delta
		}
	}
	if k&kRecursive != 0 {
		r.nrec += delta
	}
}
