package replica

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// hashicorp/raft's NewRaft reads every entry past the restored snapshot to
// find configuration changes: GetLog of the last entry, the restore, then
// GetLog of each index from the snapshot's + 1 to the last, in order, before
// any of raft's goroutines runs. It looks only at an entry's type and the
// data of configuration entries, but the store decodes each whole entry
// into fresh memory: at 10M znodes that was 213 MB of log read in 2.2 s, a
// sixth of a restart, most of it page faults. The verify pass (checked.go)
// has just read every entry through its checksum anyway, and keeps each
// entry's type and term (logTypes); startupScan answers that exact sequence
// of calls with the entry's index, term and type and no data, for every
// entry that is not a configuration change. Anything else ends it at once
// and is read from the store: a call out of order, past the last entry, the
// last entry itself (the scan's end), or any call after NewRaft returned
// (disarm). Raft's run loop starts only after the scan's last call, so no
// entry without its data reaches the state machine or a follower.
type startupScan struct {
	raft.LogStore
	st atomic.Pointer[scanState]

	skipped atomic.Uint64 // entries answered without their data (tests)
}

type scanState struct {
	mu    sync.Mutex
	types *logTypes
	// fetchedLast: raft read the last entry (NewRaft's first call); next
	// is the index the scan reads next, 0 until its first call.
	fetchedLast bool
	next        uint64
}

// armStartupScan wraps store; with types nil (the stores were handed in, or
// the log too long to keep its types) it reads everything from store.
func armStartupScan(store raft.LogStore, types *logTypes) *startupScan {
	s := &startupScan{LogStore: store}
	if types != nil && types.last > 0 {
		s.st.Store(&scanState{types: types})
	}
	return s
}

// disarm ends the scan's answers: NewRaft has returned.
func (s *startupScan) disarm() { s.st.Store(nil) }

func (s *startupScan) GetLog(index uint64, l *raft.Log) error {
	if st := s.st.Load(); st != nil {
		if typ, term, ok := s.step(st, index); ok {
			*l = raft.Log{Index: index, Term: term, Type: typ}
			s.skipped.Add(1)
			return nil
		}
	}
	return s.LogStore.GetLog(index, l)
}

// IsMonotonic passes on whether the store refuses gaps (raft-wal does;
// see kickingLogStore): raft asks the store it was given.
func (s *startupScan) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// step advances the expected sequence by index and reports whether its
// entry may be answered without data (and its type and term).
func (s *startupScan) step(st *scanState, index uint64) (raft.LogType, uint64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if s.st.Load() != st {
		return 0, 0, false
	}
	t := st.types
	switch {
	case !st.fetchedLast && index == t.last:
		st.fetchedLast = true
		return 0, 0, false
	case st.fetchedLast && (st.next == 0 || index == st.next) && index < t.last:
		st.next = index + 1
		typ, term, ok := t.at(index)
		if !ok || isConfigEntry(typ) {
			return 0, 0, false
		}
		return typ, term, true
	}
	s.st.Store(nil) // the scan's last call, or not the scan at all
	return 0, 0, false
}

// isConfigEntry reports the entry types whose data raft's scan decodes.
func isConfigEntry(t raft.LogType) bool {
	return t == raft.LogConfiguration || t == raft.LogAddPeerDeprecated || t == raft.LogRemovePeerDeprecated
}

// maxLogTypes bounds the entries whose types the verify pass keeps (one
// byte each, and a run per term): a longer log is scanned by raft in full.
const maxLogTypes = 1 << 24

// logTypes are the types and terms of the entries first..last of a log.
type logTypes struct {
	first, last uint64
	types       []raft.LogType // entry first+i; a missing entry is noType
	terms       []termRun      // ascending by from
}

// termRun: the entries from index on (to the next run) have term.
type termRun struct{ from, term uint64 }

// noType marks an entry the verify pass did not find (a gap in a bolt log
// below a snapshot): never answered without reading it.
const noType raft.LogType = 255

func newLogTypes(first, last uint64) *logTypes {
	if last < first || last-first+1 > maxLogTypes {
		return nil
	}
	t := &logTypes{first: first, last: last, types: make([]raft.LogType, last-first+1)}
	for i := range t.types {
		t.types[i] = noType
	}
	return t
}

func (t *logTypes) add(l *raft.Log) {
	if t == nil || l.Index < t.first || l.Index > t.last {
		return
	}
	t.types[l.Index-t.first] = l.Type
	if n := len(t.terms); n == 0 || t.terms[n-1].term != l.Term {
		t.terms = append(t.terms, termRun{l.Index, l.Term})
	}
}

// at is entry index's type and term; false for an entry not seen.
func (t *logTypes) at(index uint64) (raft.LogType, uint64, bool) {
	if index < t.first || index > t.last || t.types[index-t.first] == noType {
		return 0, 0, false
	}
	i := sort.Search(len(t.terms), func(i int) bool { return t.terms[i].from > index })
	if i == 0 {
		return 0, 0, false
	}
	return t.types[index-t.first], t.terms[i-1].term, true
}
