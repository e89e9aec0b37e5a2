package recipes

import (
	"fmt"
	"testing"
)

// Sequence numbers are ZooKeeper's signed 32-bit cversion printed as
// %010d: past 2^31 they turn negative. Ordering by the parsed number read
// as unsigned keeps creation order; ordering the names as strings does not.
func TestSequenceOrderPast2To31(t *testing.T) {
	seqs := []int64{2147483645, 2147483646, 2147483647, -2147483648, -2147483647, -1000000000, -5}
	var names []string
	for i, s := range seqs {
		// Shuffle the guids so name order differs from creation order.
		names = append(names, fmt.Sprintf("_c_%02x-lock-%010d", 0xff-i, int32(s)))
	}
	if names[3] != "_c_fc-lock--2147483648" || names[6] != "_c_f9-lock--000000005" {
		t.Fatalf("names as ZooKeeper formats them: %v", names)
	}
	rev := append([]string(nil), names...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	sorted := sortSeq(rev, "lock-")
	for i, n := range sorted {
		if n.name != names[i] {
			t.Fatalf("position %d: %s, want %s (order %v)", i, n.name, names[i], sorted)
		}
	}
	// The items of a queue, and the read and write nodes of a lock, too.
	if it, ok := parseItem(fmt.Sprintf("_c_ab-q%020d-s%010d", 7, int32(-2147483648))); !ok || it.key != 7 || it.seq != 1<<31 {
		t.Fatalf("parseItem: %+v %v", it, ok)
	}
	rw := sortSeq([]string{"x-write--2147483648", "x-read-2147483647"}, rwLabels...)
	if rw[0].label != readLabel || rw[1].label != writeLabel {
		t.Fatalf("read/write order: %+v", rw)
	}
	if _, ok := seqOf("claims", "lock-"); ok {
		t.Fatal("a name without the label parsed")
	}
}
