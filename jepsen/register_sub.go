package jepsen

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// registerSubHistory finds the smallest failing sub-history of a register
// history that porcupine rejected: the first key whose own history is not
// linearizable, cut at the earliest point where it already fails. Cutting
// at time T keeps the ops invoked by T; a write or cas still running at T
// becomes indeterminate and a read still running is dropped, which only
// loosens the history, so a cut that fails shows a real violation.
func registerSubHistory(ops []Op) []string {
	byKey := map[string][]Op{}
	var keys []string
	for _, op := range ops {
		if _, ok := byKey[op.Key]; !ok {
			keys = append(keys, op.Key)
		}
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	sort.Strings(keys)
	fails := func(h []Op) bool {
		return porcupine.CheckOperationsTimeout(registerModel, registerOps(h), 10*time.Second) == porcupine.Illegal
	}
	for _, k := range keys {
		h := byKey[k]
		if !fails(h) {
			continue
		}
		var cuts []int64
		for _, op := range h {
			cuts = append(cuts, op.Complete)
		}
		sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
		cut := func(t int64) []Op {
			var out []Op
			for _, op := range h {
				if op.Invoke > t {
					continue
				}
				if op.Complete > t {
					if op.F == "read" {
						continue
					}
					op.Outcome, op.Complete = Info, t
				}
				out = append(out, op)
			}
			return out
		}
		i := sort.Search(len(cuts), func(i int) bool { return fails(cut(cuts[i])) })
		sub := h
		if i < len(cuts) {
			sub = cut(cuts[i])
		}
		lines := describeOps(sub)
		out := []string{fmt.Sprintf("key %s is not linearizable; its history up to %.3fs already fails (%d ops, the last %d shown):",
			k, secs(sub[len(sub)-1].Complete), len(sub), min(len(lines), 30))}
		return append(out, lines[max(0, len(lines)-30):]...)
	}
	return nil
}
