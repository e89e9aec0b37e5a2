package watch

// The registry against a plain model: a map of maps with the same rules,
// driven by random operations on enough paths that entries are freed,
// reused and compacted, and crowds grow from inline to list to map and
// shrink back.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"coord/fsm"
	"coord/vocab"
)

// model is the registry's meaning: path -> session -> kinds.
type model map[string]map[int64]kind

func (m model) add(s int64, p string, k kind) {
	if m[p] == nil {
		m[p] = map[int64]kind{}
	}
	m[p][s] |= k
}

func (m model) drop(s int64, p string, c kind) bool {
	k := m[p][s]
	if k&c == 0 {
		return false
	}
	if k &^= c; k != 0 {
		m[p][s] = k
	} else if delete(m[p], s); len(m[p]) == 0 {
		delete(m, p)
	}
	return true
}

func (m model) trigger(t fsm.Trigger) []Event {
	set := map[int64]bool{}
	for s, k := range m[t.Path] {
		fire, c := fires(k, t.Type)
		if fire {
			set[s] = true
		}
		m.drop(s, t.Path, c)
	}
	if reachesDescendants(t.Type) {
		for p, ok := parent(t.Path); ok; p, ok = parent(p) {
			for s, k := range m[p] {
				if k&kRecursive != 0 {
					set[s] = true
				}
			}
		}
	}
	var out []Event
	for _, s := range slices.Sorted(maps.Keys(set)) {
		out = append(out, Event{Session: s, Path: t.Path, Type: t.Type, Zxid: t.Zxid})
	}
	return out
}

func (m model) dump() []string {
	var out []string
	for p, ss := range m {
		for s, k := range ss {
			out = append(out, fmt.Sprintf("%d %s %s", s, p, kindString(k)))
		}
	}
	slices.Sort(out)
	return out
}

func TestAgainstModel(t *testing.T) {
	seeds := uint64(3)
	if testing.Short() {
		seeds = 1
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			r, m := New(), model{}
			// Wide phases spread watches over many paths, then delete
			// most, so the arenas compact; narrow phases pile many
			// sessions on a few paths, so crowds grow into maps.
			var paths []string
			sessions := 4
			pick := func() string { return paths[rng.IntN(len(paths))] }
			zxid := int64(0)
			lastEnts, compacted, mapped := 0, false, false
			for phase := range 8 {
				wide := phase%2 == 0
				paths = paths[:0]
				if wide {
					sessions = 4
					for i := range 3000 {
						p := fmt.Sprintf("/w/%d/n%d", i%10, i)
						paths = append(paths, p)
						for s := range int64(1 + i%3) {
							r.AddData(s, p)
							m.add(s, p, kData)
						}
					}
				} else {
					sessions = 60
					paths = append(paths, "/", "/w", "/w/3", "/hot", "/hot/a", "/hot/a/b")
				}
				for i := range 8000 {
					s := int64(rng.IntN(sessions)) - 2 // include 0 and negative ids
					op := rng.IntN(20)
					if wide && op < 7 && rng.IntN(2) == 0 {
						op = 7 // mostly delete, so the arena empties
					}
					switch {
					case op < 7:
						p := pick()
						k := []kind{kData, kChild, kPersistent, kRecursive}[rng.IntN(4)]
						if k&(kPersistent|kRecursive) != 0 && (wide || rng.IntN(8) != 0) {
							k = kData // keep persistent watches rare
						}
						switch k {
						case kData:
							r.AddData(s, p)
						case kChild:
							r.AddChild(s, p)
						case kPersistent:
							r.AddWatch(s, p, vocab.AddWatchPersistent)
						case kRecursive:
							r.AddWatch(s, p, vocab.AddWatchPersistentRecursive)
						}
						m.add(s, p, k)
					case op < 15:
						zxid++
						tr := fsm.Trigger{Path: pick(), Type: vocab.EventType(1 + rng.IntN(4)), Zxid: zxid}
						if wide && op < 13 {
							tr.Type = deleted
						}
						sameEvents(t, fmt.Sprintf("op %d/%d trigger %+v", phase, i, tr), r.Trigger(tr), m.trigger(tr))
					case op < 17:
						p, w := pick(), vocab.WatcherType(rng.IntN(7))
						if got, want := r.Contains(s, p, w), m[p][s]&maskOf(w) != 0; got != want {
							t.Fatalf("op %d/%d: Contains(%d, %s, %v) = %v", phase, i, s, p, w, got)
						}
						if got, want := r.Remove(s, p, w), m.drop(s, p, maskOf(w)); got != want {
							t.Fatalf("op %d/%d: Remove(%d, %s, %v) = %v", phase, i, s, p, w, got)
						}
					case op < 18:
						if rng.IntN(10) == 0 {
							r.RemoveSession(s)
							for p := range m {
								m.drop(s, p, kAll)
							}
						}
					default:
						if rng.IntN(60) == 0 {
							checkViews(t, r, m)
						}
					}
					if i%500 == 0 {
						r.mu.Lock()
						compacted = compacted || len(r.ents) < lastEnts
						lastEnts = len(r.ents)
						for _, c := range r.crowds {
							mapped = mapped || c != nil && c.m != nil
						}
						r.mu.Unlock()
					}
					if i%2000 == 0 {
						checkInvariants(t, r)
						sameDump(t, fmt.Sprintf("op %d/%d", phase, i), dump(r), m.dump())
						if t.Failed() {
							t.FailNow()
						}
					}
				}
			}
			if !compacted || !mapped {
				t.Errorf("the run never compacted (%v) or never made a crowd map (%v)", compacted, mapped)
			}
			checkInvariants(t, r)
			sameDump(t, "end", dump(r), m.dump())
			checkViews(t, r, m)
			for s := range int64(60) {
				r.RemoveSession(s - 2)
			}
			if c, p, n := r.Stats(); c != 0 || p != 0 || n != 0 || r.Len() != 0 {
				t.Errorf("not empty after removing every session: %d %d %d, Len %d", c, p, n, r.Len())
			}
			checkInvariants(t, r)
		})
	}
}

// checkViews compares Stats, Len, BySession and ByPath with the model.
func checkViews(t *testing.T, r *Registry, m model) {
	t.Helper()
	bySession := map[int64][]string{}
	byPath := map[string][]int64{}
	pairs, n := 0, 0
	for p, ss := range m {
		for s, k := range ss {
			bySession[s] = append(bySession[s], p)
			byPath[p] = append(byPath[p], s)
			pairs++
			for i := range 4 {
				if k&(1<<i) != 0 {
					n++
				}
			}
		}
	}
	for _, ps := range bySession {
		slices.Sort(ps)
	}
	for _, ss := range byPath {
		slices.Sort(ss)
	}
	if c, p, total := r.Stats(); c != len(bySession) || p != len(m) || total != pairs {
		t.Fatalf("Stats = %d %d %d, want %d %d %d", c, p, total, len(bySession), len(m), pairs)
	}
	if got := r.Len(); got != n {
		t.Fatalf("Len = %d, want %d", got, n)
	}
	if got := r.BySession(); !maps.EqualFunc(got, bySession, slices.Equal) {
		t.Fatalf("BySession differs from the model")
	}
	if got := r.ByPath(); !maps.EqualFunc(got, byPath, slices.Equal) {
		t.Fatalf("ByPath differs from the model")
	}
}
