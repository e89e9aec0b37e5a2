package fsm

import (
	"coord/vocab"
	"slices"
	"unicode/utf16"
)

// ZooKeeper keeps a connection's authenticated ids in a set backed by a
// java.util.concurrent.ConcurrentHashMap (ServerCnxn.authInfo) and expands
// an "auth" ACL entry in that set's iteration order, which is neither the
// order the ids were added nor a sorted one. zkAuthOrder reproduces it, so
// that getACL after a create or setACL with "auth" returns the entries in
// the order ZooKeeper 3.8 (Java 8 to 21) returns them.
//
// The iteration order of a ConcurrentHashMap built by one thread is a pure
// function of the keys' hashCodes and the order they were put: the table
// starts with 16 bins and doubles when the size reaches 3/4 of it; a key
// goes to bin spread(hashCode) & (n-1), at the tail of the bin's list; a list
// bin that had 8 nodes before a put either doubles the table (enough times
// for a table of 4n to fit, while it has fewer than 64 bins) or becomes a
// tree bin, to whose iteration list later keys are prepended; a resize splits
// each list bin the way ConcurrentHashMap.transfer does (its last run of
// nodes going the same way kept in order, the nodes before it reversed in
// front), and tree bins in order, back to lists at 6 nodes or fewer.
// Iteration walks the bins from 0 up.

// zkAuthOrder returns ids without repeats in the order ZooKeeper iterates a
// connection's authInfo after adding them in the order given (the "ip" id
// first, as ZooKeeper adds it when the connection opens, then each id as
// authentication gives it). It is a pure function of ids.
func zkAuthOrder(ids []vocab.Id) []vocab.Id {
	if len(ids) <= 1 {
		return ids
	}
	var m chmSet
	for _, id := range ids {
		m.put(id)
	}
	out := make([]vocab.Id, 0, m.size)
	for i := range m.bins {
		for _, e := range m.iter(i) {
			out = append(out, e.id)
		}
	}
	return out
}

// chmSet models the bins of a ConcurrentHashMap used as a set by one thread.
type chmSet struct {
	bins    [][]chmEntry // a tree bin is kept last node first (see put)
	tree    []bool       // bin i is a TreeBin
	sizeCtl int          // resize when size reaches it
	size    int
	member  map[vocab.Id]struct{} // for long lists only; looked up, never iterated
}

type chmEntry struct {
	h  int32 // spread(hashCode), never negative
	id vocab.Id
}

const (
	chmTreeifyThreshold   = 8
	chmUntreeifyThreshold = 6
	chmMinTreeifyCapacity = 64
)

func (m *chmSet) put(id vocab.Id) {
	if m.bins == nil {
		m.bins, m.tree, m.sizeCtl = make([][]chmEntry, 16), make([]bool, 16), 12
	}
	if m.has(id) {
		return
	}
	if m.member != nil {
		m.member[id] = struct{}{}
	} else if m.size >= 16 {
		m.member = make(map[vocab.Id]struct{}, 2*m.size)
		for _, bin := range m.bins {
			for _, e := range bin {
				m.member[e.id] = struct{}{}
			}
		}
		m.member[id] = struct{}{}
	}
	h := chmSpread(javaIDHash(id))
	i := int(h) & (len(m.bins) - 1)
	bin := m.bins[i]
	switch {
	case len(bin) == 0:
		m.bins[i] = append(bin, chmEntry{h, id})
	case m.tree[i]:
		// TreeBin.putTreeVal puts the new node first in its iteration
		// list; the bin is kept reversed so this is an append.
		m.bins[i] = append(bin, chmEntry{h, id})
	default:
		m.bins[i] = append(bin, chmEntry{h, id})
		if len(bin) >= chmTreeifyThreshold {
			m.treeifyBin(i)
		}
	}
	m.size++
	for m.size >= m.sizeCtl {
		m.transfer()
	}
}

func (m *chmSet) has(id vocab.Id) bool {
	if m.member != nil {
		_, ok := m.member[id]
		return ok
	}
	for _, bin := range m.bins {
		for _, e := range bin {
			if e.id == id {
				return true
			}
		}
	}
	return false
}

// iter returns bin i in iteration order; a tree bin comes back as a new
// slice.
func (m *chmSet) iter(i int) []chmEntry {
	if !m.tree[i] {
		return m.bins[i]
	}
	out := slices.Clone(m.bins[i])
	slices.Reverse(out)
	return out
}

// treeifyBin: a small table grows instead (tryPresize(n << 1)).
func (m *chmSet) treeifyBin(i int) {
	n := len(m.bins)
	if n >= chmMinTreeifyCapacity {
		m.tree[i] = true
		slices.Reverse(m.bins[i])
		return
	}
	size := n << 1
	c := 1
	for c < size+size>>1+1 {
		c <<= 1
	}
	for c > m.sizeCtl {
		m.transfer()
	}
}

// transfer doubles the table as ConcurrentHashMap.transfer does.
func (m *chmSet) transfer() {
	n := len(m.bins)
	bins, tree := make([][]chmEntry, 2*n), make([]bool, 2*n)
	for i, f := range m.bins {
		if len(f) == 0 {
			continue
		}
		var lo, hi []chmEntry
		if m.tree[i] {
			for _, e := range m.iter(i) {
				if int(e.h)&n == 0 {
					lo = append(lo, e)
				} else {
					hi = append(hi, e)
				}
			}
			tree[i], tree[i+n] = len(lo) > chmUntreeifyThreshold, len(hi) > chmUntreeifyThreshold
			if tree[i] {
				slices.Reverse(lo)
			}
			if tree[i+n] {
				slices.Reverse(hi)
			}
		} else {
			runBit, lastRun := int(f[0].h)&n, 0
			for j := 1; j < len(f); j++ {
				if b := int(f[j].h) & n; b != runBit {
					runBit, lastRun = b, j
				}
			}
			// The nodes before the last run are pushed one by one on
			// the front of their new list: reversed, ahead of the run.
			for j := lastRun - 1; j >= 0; j-- {
				if int(f[j].h)&n == 0 {
					lo = append(lo, f[j])
				} else {
					hi = append(hi, f[j])
				}
			}
			if runBit == 0 {
				lo = append(lo, f[lastRun:]...)
			} else {
				hi = append(hi, f[lastRun:]...)
			}
		}
		bins[i], bins[i+n] = lo, hi
	}
	m.bins, m.tree, m.sizeCtl = bins, tree, n<<1-n>>1
}

// javaIDHash is the jute-generated org.apache.zookeeper.data.Id.hashCode.
func javaIDHash(id vocab.Id) int32 {
	r := int32(17)
	r = 37*r + javaStringHash(id.Scheme)
	r = 37*r + javaStringHash(id.ID)
	return r
}

// javaStringHash is String.hashCode over the string's UTF-16 units.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + r1
			h = 31*h + r2
			continue
		}
		h = 31*h + r
	}
	return h
}

// chmSpread is ConcurrentHashMap.spread.
func chmSpread(h int32) int32 {
	return (h ^ int32(uint32(h)>>16)) & 0x7fffffff
}
