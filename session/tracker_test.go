package session

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// newTestTracker returns a tracker created at t0 and the clock driving it.
func newTestTracker(t testing.TB, tick time.Duration) (*Tracker, *FakeClock) {
	t.Helper()
	clk := NewFakeClock(t0)
	tr, err := NewTracker(tick, clk)
	if err != nil {
		t.Fatal(err)
	}
	return tr, clk
}

// at is t0 plus d, to keep expected deadlines readable.
func at(d time.Duration) time.Time { return t0.Add(d) }

func wantDeadline(t *testing.T, tr *Tracker, id int64, want time.Time) {
	t.Helper()
	got, ok := tr.Deadline(id)
	if !ok || !got.Equal(want) {
		t.Fatalf("Deadline(%d) = %v, %v; want %v (+%v), true", id, got, ok, want, want.Sub(t0))
	}
}

func wantExpired(t *testing.T, tr *Tracker, now time.Time, want ...int64) {
	t.Helper()
	got := tr.Expired(now)
	if !slices.Equal(got, want) {
		t.Fatalf("Expired(+%v) = %v, want %v", now.Sub(t0), got, want)
	}
}

// checkInvariants verifies the tracker's internal bookkeeping agrees with
// itself: buckets, queue and sessions point at each other, and no bucket is
// empty.
func checkInvariants(t *testing.T, tr *Tracker) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.queue) != len(tr.buckets) {
		t.Fatalf("queue has %d buckets, map has %d", len(tr.queue), len(tr.buckets))
	}
	inBuckets := 0
	for i, b := range tr.queue {
		if b.index != i {
			t.Fatalf("bucket %v has index %d at position %d", b.deadline, b.index, i)
		}
		if tr.buckets[b.deadline] != b {
			t.Fatalf("bucket %v in queue but not in map", b.deadline)
		}
		if len(b.ids) == 0 {
			t.Fatalf("empty bucket %v in queue", b.deadline)
		}
		if b.deadline%tr.tick != 0 {
			t.Fatalf("bucket deadline %v is not a multiple of tick %v", b.deadline, tr.tick)
		}
		if i > 0 && tr.queue[(i-1)/2].deadline > b.deadline {
			t.Fatalf("heap order broken at %d", i)
		}
		for id := range b.ids {
			s, ok := tr.sessions[id]
			if !ok || s.bucket != b {
				t.Fatalf("session %d in bucket %v but tracked=%v", id, b.deadline, ok)
			}
			inBuckets++
		}
	}
	unbucketed := 0
	for _, s := range tr.sessions {
		if s.bucket == nil {
			unbucketed++
			if !s.closing {
				t.Fatalf("live session with no bucket")
			}
		}
	}
	if inBuckets+unbucketed != len(tr.sessions) {
		t.Fatalf("%d in buckets + %d unbucketed != %d sessions", inBuckets, unbucketed, len(tr.sessions))
	}
}

func TestNewTrackerErrors(t *testing.T) {
	if _, err := NewTracker(0, NewFakeClock(t0)); err == nil {
		t.Error("NewTracker(tick 0) succeeded")
	}
	if _, err := NewTracker(-time.Second, NewFakeClock(t0)); err == nil {
		t.Error("NewTracker(tick -1s) succeeded")
	}
	if _, err := NewTracker(time.Second, nil); err == nil {
		t.Error("NewTracker(nil clock) succeeded")
	}
}

func TestRoundToNextInterval(t *testing.T) {
	tr, _ := newTestTracker(t, time.Second)
	s := time.Second
	tests := []struct{ in, want time.Duration }{
		{0, s},
		{1, s},
		{s - 1, s},
		{s, 2 * s}, // exactly on a boundary moves to the next one, as in ZooKeeper
		{s + 1, 2 * s},
		{-1, 0},
		{-s, 0},
		{-s - 1, -s},
	}
	for _, tc := range tests {
		if got := tr.roundToNextInterval(tc.in); got != tc.want {
			t.Errorf("roundToNextInterval(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestAddFilesInRoundedUpBucket(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	if !tr.Add(1, 3*time.Second) {
		t.Fatal("Add(1) of a new session reported false")
	}
	wantDeadline(t, tr, 1, at(4*time.Second)) // 3s lands on a boundary: next one
	clk.Advance(500 * time.Millisecond)
	tr.Add(2, 3*time.Second)
	wantDeadline(t, tr, 2, at(4*time.Second)) // 3.5s rounds up to 4s: same bucket
	clk.Advance(600 * time.Millisecond)
	tr.Add(3, 3*time.Second)
	wantDeadline(t, tr, 3, at(5*time.Second)) // 4.1s rounds up to 5s
	if tr.Len() != 3 {
		t.Fatalf("Len() = %d, want 3", tr.Len())
	}
	if next, ok := tr.NextExpiry(); !ok || !next.Equal(at(4*time.Second)) {
		t.Fatalf("NextExpiry() = %v, %v; want +4s", next, ok)
	}
	checkInvariants(t, tr)
}

func TestExpiryAtBucketBoundary(t *testing.T) {
	tr, _ := newTestTracker(t, time.Second)
	tr.Add(7, 2*time.Second) // deadline +3s
	wantExpired(t, tr, at(3*time.Second-time.Nanosecond))
	if tr.IsClosing(7) {
		t.Fatal("session closing before its deadline")
	}
	wantExpired(t, tr, at(3*time.Second), 7)

	// Expired marks closing but keeps the session until Remove.
	if !tr.IsClosing(7) || !tr.Contains(7) || tr.Len() != 1 {
		t.Fatalf("after expiry: closing=%v contains=%v len=%d; want true, true, 1",
			tr.IsClosing(7), tr.Contains(7), tr.Len())
	}
	if _, ok := tr.Deadline(7); ok {
		t.Fatal("expired session still has a deadline")
	}
	if _, ok := tr.NextExpiry(); ok {
		t.Fatal("NextExpiry reports a bucket after the only one expired")
	}
	if tr.Touch(7, 2*time.Second) {
		t.Fatal("Touch revived an expired session")
	}
	wantExpired(t, tr, at(time.Hour)) // reported once only
	checkInvariants(t, tr)
	if !tr.Remove(7) || tr.Contains(7) || tr.Len() != 0 {
		t.Fatal("Remove of an expired session did not drop it")
	}
	checkInvariants(t, tr)
}

func TestTouchExtends(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 3*time.Second) // +4s
	tr.Add(2, 3*time.Second) // +4s, never touched
	clk.Advance(2500 * time.Millisecond)
	if !tr.Touch(1, 3*time.Second) {
		t.Fatal("Touch of a live session reported false")
	}
	wantDeadline(t, tr, 1, at(6*time.Second)) // 5.5s rounds up to 6s
	wantExpired(t, tr, at(4*time.Second), 2)
	wantExpired(t, tr, at(6*time.Second-time.Nanosecond))
	wantExpired(t, tr, at(6*time.Second), 1)
	checkInvariants(t, tr)
}

func TestTouchWithinSameTickKeepsBucket(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 3*time.Second) // +4s
	clk.Advance(900 * time.Millisecond)
	tr.Touch(1, 3*time.Second) // 3.9s still rounds to 4s
	wantDeadline(t, tr, 1, at(4*time.Second))
	tr.mu.Lock()
	n := len(tr.buckets)
	tr.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d buckets after a same-bucket touch, want 1", n)
	}
}

// ZooKeeper's ExpiryQueue.update replaces the deadline outright, so a touch
// with a shorter timeout can move a session earlier. The tracker matches.
func TestTouchShorterTimeoutMovesEarlier(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 10*time.Second) // +11s
	clk.Advance(time.Second)
	tr.Touch(1, 2*time.Second) // 3s -> +4s
	wantDeadline(t, tr, 1, at(4*time.Second))
	wantExpired(t, tr, at(4*time.Second), 1)
	checkInvariants(t, tr)
}

func TestTouchUnknown(t *testing.T) {
	tr, _ := newTestTracker(t, time.Second)
	if tr.Touch(42, time.Second) {
		t.Fatal("Touch of an unknown session reported true")
	}
	if tr.Contains(42) || tr.Len() != 0 {
		t.Fatal("Touch of an unknown session started tracking it")
	}
}

func TestRemove(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 2*time.Second) // +3s
	clk.Advance(2 * time.Second)
	tr.Add(2, 2*time.Second) // +5s
	if !tr.Remove(1) {
		t.Fatal("Remove(1) reported false")
	}
	if tr.Remove(1) {
		t.Fatal("second Remove(1) reported true")
	}
	if tr.Remove(99) {
		t.Fatal("Remove of an unknown session reported true")
	}
	// The +3s bucket is now empty and must not be the next expiry.
	if next, ok := tr.NextExpiry(); !ok || !next.Equal(at(5*time.Second)) {
		t.Fatalf("NextExpiry() = +%v, %v; want +5s", next.Sub(t0), ok)
	}
	wantExpired(t, tr, at(3*time.Second))
	wantExpired(t, tr, at(5*time.Second), 2)
	if tr.Touch(1, time.Second) {
		t.Fatal("Touch of a removed session reported true")
	}
	checkInvariants(t, tr)
}

func TestSetClosing(t *testing.T) {
	tr, _ := newTestTracker(t, time.Second)
	tr.Add(1, 2*time.Second) // +3s
	if tr.SetClosing(99) {
		t.Fatal("SetClosing of an unknown session reported true")
	}
	if !tr.SetClosing(1) || !tr.IsClosing(1) {
		t.Fatal("SetClosing(1) did not mark the session closing")
	}
	if tr.Touch(1, 2*time.Second) {
		t.Fatal("Touch of a closing session reported true")
	}
	// As in ZooKeeper, a closing session keeps its bucket; if its close has
	// not committed by the deadline it is reported again.
	wantDeadline(t, tr, 1, at(3*time.Second))
	wantExpired(t, tr, at(3*time.Second), 1)
	checkInvariants(t, tr)
}

func TestAddExisting(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 2*time.Second)
	wantExpired(t, tr, at(3*time.Second), 1) // now closing, out of buckets
	clk.Set(at(3 * time.Second))
	if tr.Add(1, 5*time.Second) {
		t.Fatal("Add of a tracked session reported it as new")
	}
	if !tr.IsClosing(1) {
		t.Fatal("Add cleared the closing mark")
	}
	wantDeadline(t, tr, 1, at(9*time.Second)) // re-armed: 8s rounds up to 9s
	wantExpired(t, tr, at(9*time.Second), 1)
	if tr.Len() != 1 {
		t.Fatalf("Len() = %d, want 1", tr.Len())
	}
	checkInvariants(t, tr)
}

func TestResetAll(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 2*time.Second)
	tr.Add(2, 10*time.Second)
	tr.Add(3, 4*time.Second)
	tr.Touch(3, 30*time.Second) // a touch timeout is not the stored timeout
	tr.SetClosing(2)
	wantExpired(t, tr, at(3*time.Second), 1) // 1 now closing, unbucketed

	now := clk.Advance(20*time.Second + 300*time.Millisecond)
	tr.ResetAll(now)
	for _, id := range []int64{1, 2, 3} {
		if tr.IsClosing(id) {
			t.Fatalf("session %d still closing after ResetAll", id)
		}
	}
	wantDeadline(t, tr, 1, at(23*time.Second)) // 22.3s -> 23s
	wantDeadline(t, tr, 2, at(31*time.Second)) // 30.3s -> 31s
	wantDeadline(t, tr, 3, at(25*time.Second)) // stored 4s: 24.3s -> 25s
	if !tr.Touch(1, 2*time.Second) {
		t.Fatal("Touch refused after ResetAll")
	}
	checkInvariants(t, tr)
	wantExpired(t, tr, at(time.Hour), 1, 2, 3)
}

func TestExpiredOrderIsAscendingAcrossBuckets(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	// 300 ids in a scrambled order over three buckets, so map iteration order
	// would show through if Expired did not sort.
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int64, 300)
	for i := range ids {
		ids[i] = int64(i)*7919 + 1<<32 // zxid-like values
	}
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for i, id := range ids {
		clk.Set(at(time.Duration(i%3) * time.Second))
		tr.Add(id, time.Second)
	}
	got := tr.Expired(at(time.Minute))
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Expired returned %d ids, sorted=%v; want all %d ascending", len(got), slices.IsSorted(got), len(want))
	}
	if tr.Expired(at(time.Minute)) != nil {
		t.Fatal("second Expired returned ids")
	}
}

func TestClockBeforeBase(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	clk.Set(at(-5500 * time.Millisecond))
	tr.Add(1, 2*time.Second) // -3.5s rounds up to -3s
	wantDeadline(t, tr, 1, at(-3*time.Second))
	wantExpired(t, tr, at(-3*time.Second-1))
	wantExpired(t, tr, at(-3*time.Second), 1)
}

// TestExpiryBoundsRandom drives the tracker with random operations and checks
// the contract against a model that knows nothing of buckets: a session is
// never reported before last-activity+timeout, and never later than one tick
// after it.
func TestExpiryBoundsRandom(t *testing.T) {
	const tick = 100 * time.Millisecond
	tr, clk := newTestTracker(t, tick)
	r := rand.New(rand.NewPCG(7, 11))
	type model struct {
		due     time.Time // last activity + timeout
		timeout time.Duration
		closing bool
	}
	m := map[int64]*model{}
	now := t0
	for step := range 5000 {
		now = clk.Advance(time.Duration(r.IntN(60)) * time.Millisecond)
		id := int64(r.IntN(50))
		timeout := time.Duration(200+r.IntN(1800)) * time.Millisecond
		switch op := r.IntN(10); {
		case op < 2:
			tr.Add(id, timeout)
			if s, ok := m[id]; ok {
				s.due, s.timeout = now.Add(timeout), timeout
			} else {
				m[id] = &model{due: now.Add(timeout), timeout: timeout}
			}
		case op < 6:
			s, ok := m[id]
			want := ok && !s.closing
			if got := tr.Touch(id, timeout); got != want {
				t.Fatalf("step %d: Touch(%d) = %v, want %v", step, id, got, want)
			}
			if want {
				s.due = now.Add(timeout)
			}
		case op < 7:
			if got, want := tr.Remove(id), m[id] != nil; got != want {
				t.Fatalf("step %d: Remove(%d) = %v, want %v", step, id, got, want)
			}
			delete(m, id)
		case op < 8 && step%500 == 0:
			tr.ResetAll(now)
			for _, s := range m {
				s.due, s.closing = now.Add(s.timeout), false
			}
		default:
			got := tr.Expired(now)
			if !slices.IsSorted(got) {
				t.Fatalf("step %d: Expired not sorted: %v", step, got)
			}
			for _, id := range got {
				s := m[id]
				if s == nil {
					t.Fatalf("step %d: Expired reported untracked %d", step, id)
				}
				if now.Before(s.due) {
					t.Fatalf("step %d: session %d expired at +%v, due +%v", step, id, now.Sub(t0), s.due.Sub(t0))
				}
				s.closing = true
			}
			for id, s := range m {
				if !s.closing && !now.Before(s.due.Add(tick)) {
					t.Fatalf("step %d: session %d due +%v still live at +%v", step, id, s.due.Sub(t0), now.Sub(t0))
				}
			}
		}
		if tr.Len() != len(m) {
			t.Fatalf("step %d: Len() = %d, model has %d", step, tr.Len(), len(m))
		}
	}
	checkInvariants(t, tr)
}

func TestTrackerConcurrent(t *testing.T) {
	tr, clk := newTestTracker(t, 10*time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				id := int64(g*1000 + i%1000)
				switch i % 5 {
				case 0:
					tr.Add(id, 50*time.Millisecond)
				case 1, 2:
					tr.Touch(id, 50*time.Millisecond)
				case 3:
					for _, e := range tr.Expired(clk.Advance(time.Millisecond)) {
						tr.Remove(e)
					}
				case 4:
					tr.NextExpiry()
					tr.IsClosing(id)
					tr.Len()
				}
			}
		}()
	}
	wg.Wait()
	checkInvariants(t, tr)
}

func BenchmarkTouch(b *testing.B) {
	for _, n := range []int{100_000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			tr, clk := newTestTracker(b, time.Millisecond)
			for id := range int64(n) {
				tr.Add(id, 10*time.Second)
			}
			// Advance one tick every 100 touches so most touches move a
			// session to a new bucket, the costly path.
			i := 0
			for b.Loop() {
				if i%100 == 0 {
					clk.Advance(time.Millisecond)
				}
				tr.Touch(int64(i%n), 10*time.Second)
				i++
			}
		})
	}
}

// TouchStored touches with the timeout the session was added with, reports
// a tracked session as known even while it is closing (without touching
// it), and IDs lists every tracked session.
func TestTouchStoredAndIDs(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 3*time.Second)
	tr.Add(2, 5*time.Second)
	clk.Advance(2500 * time.Millisecond)
	if !tr.TouchStored(1) {
		t.Fatal("TouchStored of a live session reported false")
	}
	wantDeadline(t, tr, 1, at(6*time.Second)) // 2.5s + 3s rounds up to 6s
	if tr.TouchStored(9) {
		t.Fatal("TouchStored of an unknown session reported true")
	}
	tr.SetClosing(2)
	before, _ := tr.Deadline(2)
	clk.Advance(time.Second)
	if !tr.TouchStored(2) {
		t.Fatal("a closing session is still known")
	}
	if after, _ := tr.Deadline(2); !after.Equal(before) {
		t.Fatalf("a closing session was touched: deadline %v -> %v", before, after)
	}
	ids := tr.IDs()
	slices.Sort(ids)
	if !slices.Equal(ids, []int64{1, 2}) {
		t.Fatalf("IDs = %v", ids)
	}
	checkInvariants(t, tr)
}

// TouchStoredAll touches each live session of a report as TouchStored
// does, leaves a closing one alone, and returns the unknown ids.
func TestTouchStoredAll(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 3*time.Second)
	tr.Add(2, 5*time.Second)
	tr.Add(3, 4*time.Second)
	tr.SetClosing(3)
	before, _ := tr.Deadline(3)
	clk.Advance(2500 * time.Millisecond)
	unknown := tr.TouchStoredAll([]int64{7, 1, 2, 3, 9})
	if !slices.Equal(unknown, []int64{7, 9}) {
		t.Fatalf("unknown = %v, want [7 9]", unknown)
	}
	wantDeadline(t, tr, 1, at(6*time.Second)) // 2.5s + 3s rounds up to 6s
	wantDeadline(t, tr, 2, at(8*time.Second)) // 2.5s + 5s rounds up to 8s
	if after, _ := tr.Deadline(3); !after.Equal(before) {
		t.Fatalf("a closing session was touched: deadline %v -> %v", before, after)
	}
	checkInvariants(t, tr)
}

// A session whose close failed is reported again a tick later; one whose
// close committed (Remove), one never reported and an unknown one are not
// touched.
func TestRetryAfterAFailedClose(t *testing.T) {
	tr, clk := newTestTracker(t, time.Second)
	tr.Add(1, 2*time.Second)
	tr.Add(2, 2*time.Second)
	tr.Add(3, 10*time.Second)
	wantExpired(t, tr, at(3*time.Second), 1, 2)
	now := at(3*time.Second + 400*time.Millisecond)
	clk.Set(now)
	if !tr.Retry(1, now) {
		t.Fatal("Retry of an expired session reported false")
	}
	tr.Remove(2)
	if tr.Retry(2, now) || tr.Retry(3, now) || tr.Retry(99, now) {
		t.Fatal("Retry moved a removed, a live or an unknown session")
	}
	if tr.Retry(1, now) {
		t.Fatal("a second Retry before the session was reported again reported true")
	}
	checkInvariants(t, tr)
	wantDeadline(t, tr, 1, at(5*time.Second)) // 4.4s rounds up to 5s
	wantDeadline(t, tr, 3, at(11*time.Second))
	if !tr.IsClosing(1) || tr.Touch(1, 2*time.Second) {
		t.Fatal("a retried session took a touch: it is still closing")
	}
	wantExpired(t, tr, at(5*time.Second), 1)
	checkInvariants(t, tr)
}
