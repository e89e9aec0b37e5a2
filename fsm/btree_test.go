package fsm

import (
	"math/rand"
	"slices"
	"testing"
	"unsafe"
)

// checkBtree verifies the B-tree invariants and returns the keys in order.
func checkBtree[V any](t *testing.T, bt *btree[int, V]) []int {
	t.Helper()
	var keys []int
	depth := -1
	var walk func(n *bnode[int, V], d int, root bool)
	walk = func(n *bnode[int, V], d int, root bool) {
		if !root && (len(n.items) < btMinItems || len(n.items) > btMaxItems) {
			t.Fatalf("node with %d items", len(n.items))
		}
		if n.kids == nil {
			if depth == -1 {
				depth = d
			} else if depth != d {
				t.Fatalf("leaves at depths %d and %d", depth, d)
			}
			for _, it := range n.items {
				keys = append(keys, it.k)
			}
			return
		}
		if len(n.kids) != len(n.items)+1 {
			t.Fatalf("%d kids for %d items", len(n.kids), len(n.items))
		}
		for i, it := range n.items {
			walk(n.kids[i], d+1, false)
			keys = append(keys, it.k)
		}
		walk(n.kids[len(n.items)], d+1, false)
	}
	if bt.root != nil {
		walk(bt.root, 0, true)
	}
	if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Fatalf("keys not strictly sorted")
	}
	if len(keys) != bt.Len() {
		t.Fatalf("Len %d but %d keys", bt.Len(), len(keys))
	}
	return keys
}

func TestBtreeAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var bt btree[int, int]
	model := map[int]int{}
	type frozen struct {
		bt    btree[int, int]
		model map[int]int
	}
	var views []frozen
	g := uint64(1)
	for step := 0; step < 60000; step++ {
		k := rng.Intn(3000)
		switch rng.Intn(10) {
		case 0, 1, 2, 3, 4:
			_, had := model[k]
			if replaced := bt.Set(g, k, step); replaced != had {
				t.Fatalf("Set(%d) replaced=%v, model had=%v", k, replaced, had)
			}
			model[k] = step
		case 5, 6, 7, 8:
			want, had := model[k]
			got, ok := bt.Delete(g, k)
			if ok != had || got != want {
				t.Fatalf("Delete(%d) = %d,%v want %d,%v", k, got, ok, want, had)
			}
			delete(model, k)
		case 9:
			if rng.Intn(50) == 0 { // freeze a view: later writes must not touch it
				views = append(views, frozen{bt, cloneMap(model)})
				g++
			}
		}
		if step%5000 == 0 {
			checkBtree(t, &bt)
		}
	}
	keys := checkBtree(t, &bt)
	if len(keys) != len(model) {
		t.Fatalf("%d keys, model %d", len(keys), len(model))
	}
	for _, k := range keys {
		v, _ := bt.Get(k)
		if model[k] != v {
			t.Fatalf("key %d = %d, model %d", k, v, model[k])
		}
	}
	if len(views) < 5 {
		t.Fatalf("only %d views taken", len(views))
	}
	for i, v := range views {
		keys := checkBtree(t, &v.bt)
		if len(keys) != len(v.model) {
			t.Fatalf("view %d changed: %d keys, had %d", i, len(keys), len(v.model))
		}
		for k, want := range v.model {
			if got, ok := v.bt.Get(k); !ok || got != want {
				t.Fatalf("view %d: key %d = %d,%v want %d", i, k, got, ok, want)
			}
		}
	}
}

func cloneMap(m map[int]int) map[int]int {
	c := make(map[int]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func TestBuildBtree(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 1000, 1023, 1024, 1025, 33000} {
		items := make([]bitem[int, int], n)
		for i := range items {
			items[i] = bitem[int, int]{i * 2, i}
		}
		bt := buildBtree[int, int](1, items)
		keys := checkBtree(t, &bt)
		if len(keys) != n {
			t.Fatalf("n=%d: built %d keys", n, len(keys))
		}
		// The built tree must accept further writes in a new generation.
		bt.Set(2, 1, -1)
		bt.Delete(2, 0)
		checkBtree(t, &bt)
	}
}

func TestBtreeAscendStops(t *testing.T) {
	var bt btree[int, int]
	for i := 0; i < 500; i++ {
		bt.Set(1, i, i)
	}
	var seen []int
	bt.Ascend(func(k, _ int) bool { seen = append(seen, k); return k < 99 })
	if len(seen) != 100 || seen[99] != 99 {
		t.Fatalf("ascend visited %d keys", len(seen))
	}
}

// TestZnodeSizeClass keeps a znode within the 112-byte allocation class:
// one more field would move every znode of a large tree to 128 bytes.
func TestZnodeSizeClass(t *testing.T) {
	if s := unsafe.Sizeof(znode{}); s > 112 {
		t.Fatalf("a znode takes %d bytes, more than the 112-byte size class", s)
	}
}

// TestBtreeAscendingFill: keys inserted in ascending order leave the left
// half of every split with an array of its own size, not the full node's.
func TestBtreeAscendingFill(t *testing.T) {
	var bt btree[int, int]
	for i := 0; i < 10000; i++ {
		bt.Set(1, i, i)
	}
	checkBtree(t, &bt)
	var items, capacity int
	var walk func(n *bnode[int, int])
	walk = func(n *bnode[int, int]) {
		items += len(n.items)
		capacity += cap(n.items)
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(bt.root)
	if float64(capacity) > 1.3*float64(items) {
		t.Fatalf("%d items in arrays of %d: ascending inserts leave half-empty arrays", items, capacity)
	}
}
