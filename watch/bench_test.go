package watch

import (
	"fmt"
	"testing"

	"coord/fsm"
	"coord/vocab"
)

// benchRegistry holds 100k one-shot data watches: 10k sessions, each
// watching 10 of 10k paths, so each path has 10 watchers.
func benchRegistry(b *testing.B) (*Registry, []string) {
	const sessions, perSession, npaths = 10_000, 10, 10_000
	r := New()
	paths := make([]string, npaths)
	for i := range paths {
		paths[i] = fmt.Sprintf("/bench/%02d/node-%d", i%100, i)
	}
	for s := range sessions {
		for j := range perSession {
			r.AddData(int64(s+1), paths[(s+j*1000)%npaths])
		}
	}
	if r.Len() != sessions*perSession {
		b.Fatalf("Len %d", r.Len())
	}
	return r, paths
}

// Trigger on a watched path fires and removes its 10 watches; the loop puts
// them back, as the clients' next getData would.
func BenchmarkTriggerHit(b *testing.B) {
	r, paths := benchRegistry(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := paths[i%len(paths)]
		evs := r.Trigger(fsm.Trigger{Path: p, Type: vocab.EventNodeDataChanged, Zxid: int64(i + 1)})
		if len(evs) != 10 {
			b.Fatalf("%d events", len(evs))
		}
		for _, e := range evs {
			r.AddData(e.Session, p)
		}
	}
}

// Trigger on a path with 10 persistent watchers, which stay.
func BenchmarkTriggerPersistent(b *testing.B) {
	r, paths := benchRegistry(b)
	for s := range 10 {
		if err := r.AddWatch(int64(20_000+s), paths[0], vocab.AddWatchPersistent); err != nil {
			b.Fatal(err)
		}
	}
	r.Trigger(fsm.Trigger{Path: paths[0], Type: vocab.EventNodeDataChanged, Zxid: 1}) // fire the one-shots there
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if evs := r.Trigger(fsm.Trigger{Path: paths[0], Type: vocab.EventNodeDataChanged, Zxid: int64(i + 2)}); len(evs) != 10 {
			b.Fatalf("%d events", len(evs))
		}
	}
}

// Trigger on a path nobody watches (most of a write load).
func BenchmarkTriggerMiss(b *testing.B) {
	r, _ := benchRegistry(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if evs := r.Trigger(fsm.Trigger{Path: "/bench/07/other", Type: vocab.EventNodeDataChanged, Zxid: int64(i + 1)}); evs != nil {
			b.Fatal(evs)
		}
	}
}

// Trigger with recursive watches in the registry, so every trigger walks
// the changed node's ancestors; one of them watches this subtree.
func BenchmarkTriggerRecursive(b *testing.B) {
	r, paths := benchRegistry(b)
	for i := range 1000 {
		if err := r.AddWatch(int64(20_000+i), fmt.Sprintf("/bench/%02d", i%100), vocab.AddWatchPersistentRecursive); err != nil {
			b.Fatal(err)
		}
	}
	kids := make([]string, len(paths))
	for i, p := range paths {
		kids[i] = p + "/child"
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := kids[i%len(kids)]
		evs := r.Trigger(fsm.Trigger{Path: p, Type: vocab.EventNodeCreated, Zxid: int64(i + 1)})
		if len(evs) != 10 {
			b.Fatalf("%d events", len(evs))
		}
	}
}

// AddData of a watch already held, on the read path.
func BenchmarkAddData(b *testing.B) {
	r, paths := benchRegistry(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.AddData(int64(i%10_000+1), paths[i%len(paths)])
	}
}
