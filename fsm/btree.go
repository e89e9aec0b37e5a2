package fsm

import (
	"cmp"
	"slices"
)

// btree is a persistent, copy-on-write B-tree map from K to V, kept sorted by
// key. It is what makes snapshots and read views O(1): a view keeps the root
// of a frozen generation and the writer copies a node before changing it.
//
// Every node records the generation that created it. A writer working in
// generation g may change a node of generation g in place (nobody else can
// see it yet); any older node is shared with some view and is copied first.
// Bumping the writer's generation therefore freezes everything built so far.
//
// The zero btree is an empty map. A btree value is small (root and count), so
// it is embedded by value in znodes and the state struct.
type btree[K cmp.Ordered, V any] struct {
	root *bnode[K, V]
	n    int
}

const (
	btMaxItems = 31                   // items per node before it splits
	btMinItems = (btMaxItems - 1) / 2 // items a non-root node keeps
)

type bitem[K cmp.Ordered, V any] struct {
	k K
	v V
}

type bnode[K cmp.Ordered, V any] struct {
	gen   uint64
	items []bitem[K, V]
	kids  []*bnode[K, V] // nil in leaves; otherwise len(items)+1
}

// Len returns the number of keys.
func (t *btree[K, V]) Len() int { return t.n }

// Get returns the value stored under k.
func (t *btree[K, V]) Get(k K) (V, bool) {
	n := t.root
	for n != nil {
		i, found := n.find(k)
		if found {
			return n.items[i].v, true
		}
		if n.kids == nil {
			break
		}
		n = n.kids[i]
	}
	var zero V
	return zero, false
}

// Set stores v under k, working in generation g, and reports whether k was
// already present.
func (t *btree[K, V]) Set(g uint64, k K, v V) bool {
	if t.root == nil {
		t.root = &bnode[K, V]{gen: g, items: []bitem[K, V]{{k, v}}}
		t.n = 1
		return false
	}
	t.root = t.root.mut(g)
	if len(t.root.items) >= btMaxItems {
		left := t.root
		mid, right := left.split(g, btMaxItems/2)
		t.root = &bnode[K, V]{gen: g, items: []bitem[K, V]{mid}, kids: []*bnode[K, V]{left, right}}
	}
	replaced := t.root.insert(g, k, v)
	if !replaced {
		t.n++
	}
	return replaced
}

// Delete removes k, working in generation g, and returns its value.
func (t *btree[K, V]) Delete(g uint64, k K) (V, bool) {
	var zero V
	if t.root == nil {
		return zero, false
	}
	if _, ok := t.Get(k); !ok {
		// Checking first keeps a miss from copying nodes of a frozen tree.
		return zero, false
	}
	t.root = t.root.mut(g)
	out := t.root.remove(g, k, false)
	if len(t.root.items) == 0 {
		if t.root.kids == nil {
			t.root = nil
		} else {
			t.root = t.root.kids[0]
		}
	}
	t.n--
	return out.v, true
}

// Ascend calls fn for every key in order until fn returns false.
func (t *btree[K, V]) Ascend(fn func(K, V) bool) {
	if t.root != nil {
		t.root.ascend(fn)
	}
}

func (n *bnode[K, V]) ascend(fn func(K, V) bool) bool {
	for i, it := range n.items {
		if n.kids != nil && !n.kids[i].ascend(fn) {
			return false
		}
		if !fn(it.k, it.v) {
			return false
		}
	}
	if n.kids != nil {
		return n.kids[len(n.items)].ascend(fn)
	}
	return true
}

// find returns the index of k in n.items, or where it would be inserted.
func (n *bnode[K, V]) find(k K) (int, bool) {
	lo, hi := 0, len(n.items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if n.items[m].k < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(n.items) && n.items[lo].k == k
}

// mut returns n itself if generation g owns it, or a private copy.
func (n *bnode[K, V]) mut(g uint64) *bnode[K, V] {
	if n.gen == g {
		return n
	}
	c := &bnode[K, V]{gen: g, items: slices.Clone(n.items)}
	if n.kids != nil {
		c.kids = slices.Clone(n.kids)
	}
	return c
}

// mutKid makes child i of the (already mutable) n mutable.
func (n *bnode[K, V]) mutKid(g uint64, i int) *bnode[K, V] {
	c := n.kids[i].mut(g)
	n.kids[i] = c
	return c
}

// split cuts the mutable n at item i: n keeps items[:i], the item at i is
// returned to go up, and a new node holds the rest.
func (n *bnode[K, V]) split(g uint64, i int) (bitem[K, V], *bnode[K, V]) {
	mid := n.items[i]
	right := &bnode[K, V]{gen: g, items: slices.Clone(n.items[i+1:])}
	// n keeps a copy of its half, not the full node's array: when keys
	// arrive in ascending order (sequential nodes, or names made in order)
	// the left half never grows again, and the full array would keep twice
	// the memory its items need for good.
	n.items = slices.Clone(n.items[:i])
	if n.kids != nil {
		right.kids = slices.Clone(n.kids[i+1:])
		n.kids = slices.Clone(n.kids[:i+1])
	}
	return mid, right
}

// insert puts (k, v) below the mutable, non-full n.
func (n *bnode[K, V]) insert(g uint64, k K, v V) bool {
	i, found := n.find(k)
	if found {
		n.items[i].v = v
		return true
	}
	if n.kids == nil {
		n.items = slices.Insert(n.items, i, bitem[K, V]{k, v})
		return false
	}
	c := n.mutKid(g, i)
	if len(c.items) >= btMaxItems {
		mid, right := c.split(g, btMaxItems/2)
		n.items = slices.Insert(n.items, i, mid)
		n.kids = slices.Insert(n.kids, i+1, right)
		switch {
		case k == mid.k:
			n.items[i].v = v
			return true
		case k > mid.k:
			c = right
		}
	}
	return c.insert(g, k, v)
}

// remove deletes k (or, with max set, the largest item) from the subtree of
// the mutable n, which must hold more than btMinItems items unless it is the
// root. The caller has checked that k is present.
func (n *bnode[K, V]) remove(g uint64, k K, max bool) bitem[K, V] {
	var (
		i     int
		found bool
	)
	if max {
		if n.kids == nil {
			out := n.items[len(n.items)-1]
			n.items[len(n.items)-1] = bitem[K, V]{}
			n.items = n.items[:len(n.items)-1]
			return out
		}
		i = len(n.items)
	} else {
		i, found = n.find(k)
		if n.kids == nil {
			out := n.items[i]
			n.items = slices.Delete(n.items, i, i+1)
			return out
		}
	}
	if len(n.kids[i].items) <= btMinItems {
		n.growKid(g, i)
		return n.remove(g, k, max) // the item may have moved; look again
	}
	c := n.mutKid(g, i)
	if found {
		// Replace the item with its predecessor, the largest item to its left.
		out := n.items[i]
		n.items[i] = c.remove(g, k, true)
		return out
	}
	return c.remove(g, k, max)
}

// growKid gives child i more than btMinItems items by taking one from a
// sibling through the separator, or by merging it with a sibling.
func (n *bnode[K, V]) growKid(g uint64, i int) {
	switch {
	case i > 0 && len(n.kids[i-1].items) > btMinItems:
		c, left := n.mutKid(g, i), n.mutKid(g, i-1)
		last := len(left.items) - 1
		c.items = slices.Insert(c.items, 0, n.items[i-1])
		n.items[i-1] = left.items[last]
		left.items[last] = bitem[K, V]{}
		left.items = left.items[:last]
		if left.kids != nil {
			lk := len(left.kids) - 1
			c.kids = slices.Insert(c.kids, 0, left.kids[lk])
			left.kids[lk] = nil
			left.kids = left.kids[:lk]
		}
	case i < len(n.items) && len(n.kids[i+1].items) > btMinItems:
		c, right := n.mutKid(g, i), n.mutKid(g, i+1)
		c.items = append(c.items, n.items[i])
		n.items[i] = right.items[0]
		right.items = slices.Delete(right.items, 0, 1)
		if right.kids != nil {
			c.kids = append(c.kids, right.kids[0])
			right.kids = slices.Delete(right.kids, 0, 1)
		}
	default:
		if i >= len(n.items) {
			i--
		}
		c := n.mutKid(g, i)
		right := n.kids[i+1]
		c.items = append(c.items, n.items[i])
		c.items = append(c.items, right.items...)
		if c.kids != nil {
			c.kids = append(c.kids, right.kids...)
		}
		n.items = slices.Delete(n.items, i, i+1)
		n.kids = slices.Delete(n.kids, i+1, i+2)
	}
}

// buildBtree makes a btree of generation g from items sorted by strictly
// increasing key, packing nodes nearly full (restore uses it).
func buildBtree[K cmp.Ordered, V any](g uint64, items []bitem[K, V]) btree[K, V] {
	if len(items) == 0 {
		return btree[K, V]{}
	}
	return btree[K, V]{root: buildLevel[K, V](g, items, nil), n: len(items)}
}

// buildLevel turns one level (items separated by len(items)+1 kids, or leaf
// items when kids is nil) into the root of a subtree.
func buildLevel[K cmp.Ordered, V any](g uint64, items []bitem[K, V], kids []*bnode[K, V]) *bnode[K, V] {
	n := len(items)
	if n <= btMaxItems {
		return &bnode[K, V]{gen: g, items: slices.Clone(items), kids: slices.Clone(kids)}
	}
	parts := (n + btMaxItems + 1) / (btMaxItems + 1) // ceil((n+1)/(max+1))
	per := n - (parts - 1)
	base, extra := per/parts, per%parts
	upItems := make([]bitem[K, V], 0, parts-1)
	upKids := make([]*bnode[K, V], 0, parts)
	pos := 0
	for j := 0; j < parts; j++ {
		sz := base
		if j < extra {
			sz++
		}
		node := &bnode[K, V]{gen: g, items: slices.Clone(items[pos : pos+sz])}
		if kids != nil {
			node.kids = slices.Clone(kids[pos : pos+sz+1])
		}
		upKids = append(upKids, node)
		pos += sz
		if j < parts-1 {
			upItems = append(upItems, items[pos])
			pos++
		}
	}
	return buildLevel(g, upItems, upKids)
}
