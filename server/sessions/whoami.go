package sessions

import (
	"coord/vocab"
	"unicode/utf16"
)

// whoAmIOrder returns a connection's identities in the order ZooKeeper 3.8
// lists them in a whoAmI reply (zkCli.sh whoami prints them in that order):
// ZooKeeper keeps them in a set backed by a java.util.concurrent
// ConcurrentHashMap, so the order is that map's iteration order, decided
// by each Id's hashCode, the table size and the order of insertion, not by
// insertion alone. ids comes in the order the identities were added (the
// address first, then the certificate, then each addauth or SASL login),
// which is the order ZooKeeper adds them; duplicates appear once, as in a
// set.
//
// The map is simulated: a table of 16 bins growing to twice its size when
// it holds three quarters of it, entries appended to their bin, and a
// resize splitting each bin as ConcurrentHashMap.transfer does. (Bins of
// eight or more turn into trees in a table of 64 or more, which a session
// with a handful of identities never reaches.)
func whoAmIOrder(ids []vocab.Id) []vocab.Id {
	type entry struct {
		hash int32
		id   vocab.Id
	}
	n := 16
	table := make([][]entry, n)
	count := 0
	for _, id := range ids {
		h := spread(idHashCode(id))
		bin := &table[int(h)&(n-1)]
		dup := false
		for _, e := range *bin {
			if e.id == id {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		*bin = append(*bin, entry{h, id})
		count++
		if count < n-n/4 {
			continue
		}
		// transfer: a bin's entries before its last run of one high bit
		// are prepended, one by one, to the new low or high bin (so they
		// come out reversed); that run keeps its order at the end.
		next := make([][]entry, 2*n)
		for i, b := range table {
			if len(b) == 0 {
				continue
			}
			last := len(b) - 1
			runBit := int(b[last].hash) & n
			for last > 0 && int(b[last-1].hash)&n == runBit {
				last--
			}
			var lo, hi []entry
			for _, e := range b[:last] {
				if int(e.hash)&n == 0 {
					lo = append([]entry{e}, lo...)
				} else {
					hi = append([]entry{e}, hi...)
				}
			}
			if runBit == 0 {
				lo = append(lo, b[last:]...)
			} else {
				hi = append(hi, b[last:]...)
			}
			next[i], next[i+n] = lo, hi
		}
		table, n = next, 2*n
	}
	out := make([]vocab.Id, 0, count)
	for _, b := range table {
		for _, e := range b {
			out = append(out, e.id)
		}
	}
	return out
}

// idHashCode is org.apache.zookeeper.data.Id.hashCode.
func idHashCode(id vocab.Id) int32 {
	h := int32(17)
	h = 37*h + javaStringHash(id.Scheme)
	h = 37*h + javaStringHash(id.ID)
	return h
}

// javaStringHash is java.lang.String.hashCode (over UTF-16 code units).
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// spread is ConcurrentHashMap.spread.
func spread(h int32) int32 {
	return (h ^ int32(uint32(h)>>16)) & 0x7fffffff
}
