package watch

// The registry under concurrent use, meant for -race: readers register from
// views while one apply goroutine triggers, as the server runs it.

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"coord/fsm"
	"coord/vocab"
)

// Readers register data watches "as of" the zxid the apply goroutine last
// published, on paths that the apply goroutine changes exactly once each.
// Every watch must then end in exactly one of two ways: it fires once (at
// registration or by the trigger) if the change came after its view, or it
// stays registered and never fires if its view already showed the change.
// A lost or doubled event fails the test.
func TestConcurrentAsOfRegistration(t *testing.T) {
	const readers, perReader = 4, 400
	r := New()
	var published atomic.Int64 // zxid whose triggers have all been passed to Trigger

	// The apply goroutine changes every /g/i once, interleaving readers.
	order := make([]string, 0, readers*perReader)
	for i := range perReader {
		for g := range readers {
			order = append(order, fmt.Sprintf("/%d/%d", g, i))
		}
	}
	changedAt := make(map[string]int64, len(order))
	// The two sides are paced to within a row of each other, so that changes
	// land between a reader's view and its registration.
	var progress [readers]atomic.Int64 // registrations each reader completed
	fired := make(map[Event]int)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, p := range order {
			for progress[i%readers].Load() < int64(i/readers) {
				runtime.Gosched()
			}
			z := int64(i + 1)
			changedAt[p] = z
			evs := r.Trigger(fsm.Trigger{Path: p, Type: changed, Zxid: z})
			if !slices.IsSortedFunc(evs, func(a, b Event) int { return int(a.Session - b.Session) }) {
				t.Errorf("trigger %d: events out of order: %v", z, evs)
			}
			for _, e := range evs {
				fired[e]++
			}
			published.Store(z)
		}
	}()

	asOf := make([][]int64, readers)
	immediate := make([][]Event, readers)
	for g := range readers {
		asOf[g] = make([]int64, perReader)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := int64(g + 1)
			for i := range perReader {
				p := fmt.Sprintf("/%d/%d", g, i)
				for published.Load() < int64((i-1)*readers) {
					runtime.Gosched()
				}
				for {
					// Some readers hold an older view for a while.
					z := max(0, published.Load()-int64(i%4*readers))
					evs, err := r.AddDataAsOf(s, p, z)
					if errors.Is(err, ErrViewTooOld) {
						continue // the view fell out of the history: read a newer one
					}
					if err != nil {
						t.Error(err)
						return
					}
					asOf[g][i] = z
					immediate[g] = append(immediate[g], evs...)
					break
				}
				progress[g].Store(int64(i + 1))
				if i%50 == 0 {
					r.Stats()
					r.ByPath()
					r.Contains(s, p, vocab.WatcherData)
				}
			}
		}()
	}
	wg.Wait()
	checkInvariants(t, r)

	nimm := 0
	for g := range readers {
		nimm += len(immediate[g])
		for _, e := range immediate[g] {
			fired[e]++
		}
	}
	t.Logf("%d of %d watches fired at registration from the history", nimm, readers*perReader)
	left := map[string]bool{}
	for _, d := range dump(r) {
		left[d] = true
	}
	for g := range readers {
		s := int64(g + 1)
		for i := range perReader {
			p := fmt.Sprintf("/%d/%d", g, i)
			z := changedAt[p]
			e := ev(s, p, changed, z)
			registered := left[fmt.Sprintf("%d %s d", s, p)]
			if z > asOf[g][i] {
				if fired[e] != 1 || registered {
					t.Errorf("%s changed at %d after view %d: fired %d times, still registered %v",
						p, z, asOf[g][i], fired[e], registered)
				}
			} else if fired[e] != 0 || !registered {
				t.Errorf("%s changed at %d, seen by view %d: fired %d times, registered %v",
					p, z, asOf[g][i], fired[e], registered)
			}
			delete(fired, e)
		}
	}
	for e, n := range fired {
		t.Errorf("unexpected event %+v (%d times)", e, n)
	}
}

// Every operation at once, with bounded loops; the registry must stay
// consistent and, after a sweep and RemoveSession, be empty.
func TestConcurrentMixed(t *testing.T) {
	const workers, rounds, paths = 6, 600, 12
	r := New()
	var zxid atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := int64(w + 1)
			for i := range rounds {
				p := fmt.Sprintf("/c/%d", (i*7+w)%paths)
				switch i % 8 {
				case 0, 1:
					r.AddData(s, p)
				case 2:
					r.AddChild(s, p)
				case 3:
					if err := r.AddWatch(s, p, vocab.AddWatchMode(i/8%2)); err != nil {
						t.Error(err)
					}
				case 4:
					r.Remove(s, p, vocab.WatcherType(1+i/8%5))
				case 5:
					r.Contains(s, p, vocab.WatcherAny)
					r.BySession()
				case 6:
					typ := vocab.EventType(1 + i/8%4)
					r.Trigger(fsm.Trigger{Path: p, Type: typ, Zxid: zxid.Add(1)})
				case 7:
					if i%64 == 7 {
						r.RemoveSession(s)
					}
					r.Stats()
					r.Len()
				}
			}
		}()
	}
	wg.Wait()
	checkInvariants(t, r)

	for i := range paths {
		r.Trigger(fsm.Trigger{Path: fmt.Sprintf("/c/%d", i), Type: deleted, Zxid: zxid.Add(1)})
	}
	for _, d := range dump(r) {
		var s int64
		var p, k string
		fmt.Sscan(d, &s, &p, &k)
		if k != "p" && k != "r" && k != "pr" {
			t.Errorf("one-shot watch survived its node's deletion: %s", d)
		}
	}
	for w := range workers {
		r.RemoveSession(int64(w + 1))
	}
	if c, p, n := r.Stats(); c != 0 || p != 0 || n != 0 || r.Len() != 0 {
		t.Errorf("not empty after removing every session: %d %d %d, Len %d", c, p, n, r.Len())
	}
	checkInvariants(t, r)
}
