package replica

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"coord/fsm"
)

// BenchmarkApplyCommandEntry applies entries of one create each, or of a
// batch of 16, through the raft adapter's decode and apply (no raft).
func BenchmarkApplyCommandEntry(b *testing.B) {
	for _, per := range []int{1, 16} {
		b.Run(fmt.Sprintf("cmds=%d", per), func(b *testing.B) {
			s := newBare("t#b")
			data := make([]byte, 100)
			entries := make([]*raft.Log, b.N)
			for i := range entries {
				cmds := make([]*fsm.Command, per)
				for j := range cmds {
					cmds[j] = createCmd(fmt.Sprintf("/n%09d-%02d", i, j), data)
				}
				entries[i] = entryOf(uint64(i+1), "other#b", uint64(i*per+1), cmds...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for _, l := range entries {
				s.fsm.applyCommand(l)
			}
		})
	}
}
