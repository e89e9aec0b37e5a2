package watch

// Heap bytes per watch, measured as a user sees them: the live heap after a
// full GC, with the registry built, minus the live heap before. Each path
// arrives as a fresh string, as the server decodes it from a request, so the
// bytes of the path strings the registry keeps are counted, as they are in
// ZooKeeper's WatchManager (whose maps hold the path strings too).

import (
	"runtime"
	"strconv"
	"testing"
	"unsafe"
)

// appPath returns a fresh string like /app/node-000123.
func appPath(i int) string {
	b := make([]byte, 0, 32)
	b = append(b, "/app/node-"...)
	s := strconv.Itoa(i)
	for range 6 - len(s) {
		b = append(b, '0')
	}
	b = append(b, s...)
	return string(b)
}

// memCase is one way of filling a registry with watches.
type memCase struct {
	name string
	fill func(r *Registry)
}

var memCases = []memCase{
	// One session sets 200k exists watches on distinct (mostly missing)
	// nodes.
	{"exists-1session-200kpaths", func(r *Registry) {
		for i := range 200_000 {
			r.AddData(1, appPath(i))
		}
	}},
	// 1,000 sessions each watch the same 200 nodes.
	{"data-1000sessions-200paths", func(r *Registry) {
		for s := range 1000 {
			for i := range 200 {
				r.AddData(int64(s+1), appPath(i))
			}
		}
	}},
	// 100 sessions set 2,000 watches each on 100k nodes, alternately data
	// and child watches, so each node has two watchers of the 200k.
	{"mixed-100sessions-100kpaths", func(r *Registry) {
		for s := range 100 {
			for j := range 2000 {
				p := appPath((s*1000 + j) % 100_000)
				if j%2 == 0 {
					r.AddData(int64(s+1), p)
				} else {
					r.AddChild(int64(s+1), p)
				}
			}
		}
	}},
}

// liveHeap returns the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // the first may leave finalizer-held or swept-late objects
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// bytesPerWatch builds a registry with fill and returns the heap it holds per
// registered watch (Len) and the number of watches.
func bytesPerWatch(fill func(r *Registry)) (float64, int) {
	before := liveHeap()
	r := New()
	fill(r)
	after := liveHeap()
	n := r.Len()
	runtime.KeepAlive(r)
	return float64(int64(after)-int64(before)) / float64(n), n
}

func BenchmarkMemory(b *testing.B) {
	for _, c := range memCases {
		b.Run(c.name, func(b *testing.B) {
			var per float64
			for range b.N {
				per, _ = bytesPerWatch(c.fill)
			}
			b.ReportMetric(per, "B/watch")
		})
	}
}

// maxBytesPerWatch bounds the heap per watch in every memCases case. The
// registry held 310 B per watch in the single-session case before its
// storage was made compact, and holds about 92 now (Go 1.26, amd64); Apache
// ZooKeeper 3.8 holds about 283 B for the same watches (cmd/watchmem).
const maxBytesPerWatch = 150

// TestMemoryPerWatch measures the heap per watch of every case and fails
// above maxBytesPerWatch (go test -run MemoryPerWatch -v ./watch/ shows
// the numbers). It runs no test in parallel, so the heap is its own.
func TestMemoryPerWatch(t *testing.T) {
	if size := unsafe.Sizeof(entry{}); size != 32 {
		t.Errorf("an entry takes %d bytes, want 32", size)
	}
	for _, c := range memCases {
		per, n := bytesPerWatch(c.fill)
		t.Logf("%-28s %7d watches %6.1f B/watch", c.name, n, per)
		if n != 200_000 {
			t.Errorf("%s: %d watches registered, want 200000", c.name, n)
		}
		if per > maxBytesPerWatch {
			t.Errorf("%s: %.1f heap bytes per watch, want at most %d", c.name, per, maxBytesPerWatch)
		}
	}
}
