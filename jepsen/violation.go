package jepsen

import (
	"fmt"
	"sort"
)

// violation is one thing a checker found wrong, with the smallest
// sub-history that shows it (the ops of one key, session or node in the
// violating window), already rendered one line each.
type violation struct {
	What string
	Sub  []string
}

// violationDetails turns violations into a Verdict's Details: the
// violation with the smallest sub-history first, in full, then the others'
// one-line descriptions (at most limit in all).
func violationDetails(vs []violation, limit int) []string {
	if len(vs) == 0 {
		return nil
	}
	vs = append([]violation(nil), vs...)
	sort.SliceStable(vs, func(i, j int) bool { return len(vs[i].Sub) < len(vs[j].Sub) })
	out := []string{vs[0].What}
	if len(vs[0].Sub) > 0 {
		out = append(out, fmt.Sprintf("smallest failing sub-history (%d entries):", len(vs[0].Sub)))
		out = append(out, vs[0].Sub...)
	}
	var rest []string
	for _, v := range vs[1:] {
		rest = append(rest, v.What)
	}
	if len(rest) > 0 {
		out = append(out, fmt.Sprintf("%d more violations:", len(rest)))
		out = append(out, limitDetails(rest, limit)...)
	}
	return out
}
