package replica

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// The startup replay's commands, decoded as raft reads them, give the state
// a plain apply gives, byte for byte; an entry decoded ahead whose index
// now holds another term's entry (a new leader replaced the tail) is not
// used; and once the replay is applied nothing is decoded or kept.
func TestPredecodedReplayAppliesTheSame(t *testing.T) {
	const n = 300
	var logs []*raft.Log
	for i := uint64(1); i <= n; i++ {
		logs = append(logs, entryOf(i, "earlier", i*2,
			createCmd(fmt.Sprintf("/n%03d", i), []byte(fmt.Sprintf("a%d", i))),
			createCmd(fmt.Sprintf("/n%03d/k", i), []byte(fmt.Sprintf("b%d", i)))))
	}
	// The log read ahead held another entry at 200, of term 1; the one
	// applied there is of term 2.
	stale := entryOf(200, "earlier", 1, createCmd("/stale", nil))
	replaced := entryOf(200, "earlier", 400, createCmd("/n200", []byte("new")), createCmd("/n200/k", []byte("new")))
	replaced.Term = 2
	for _, l := range logs[199:] {
		l.Term = 2
	}
	logs[199] = replaced

	plain := newBare("now")
	ahead := newBare("now")
	ahead.fsm.startPredecode(n)
	for _, l := range logs {
		read := l
		if l.Index == 200 {
			read = stale
		}
		ahead.fsm.predecode(read)
	}
	if got := len(ahead.fsm.pre.m); got != n {
		t.Fatalf("%d entries decoded ahead, want %d", got, n)
	}
	for i := 0; i < n; i += 50 {
		plain.fsm.ApplyBatch(logs[i : i+50])
		ahead.fsm.ApplyBatch(logs[i : i+50])
	}
	if !bytes.Equal(snapshotOf(t, plain.fsm), snapshotOf(t, ahead.fsm)) {
		t.Fatal("the state applied from commands decoded ahead differs from a plain apply's")
	}
	if got := ahead.fsm.pre.used.Load(); got != n-1 {
		t.Fatalf("%d entries applied from commands decoded ahead, want %d (all but the replaced one)", got, n-1)
	}
	if _, err := ahead.View().Exists("/stale"); err == nil {
		t.Fatal("the apply used a command decoded from the entry its index held before")
	}
	if ahead.fsm.pre.on.Load() || ahead.fsm.pre.m != nil {
		t.Fatal("still decoding ahead after the replay was applied")
	}
	ahead.fsm.predecode(entryOf(n+1, "x", 1, createCmd("/late", nil)))
	if ahead.fsm.pre.m != nil {
		t.Fatal("an entry past the replay was decoded ahead")
	}
}

// What waits decoded is bounded in bytes of entry data as well as in
// entries; what the apply takes or passes frees its share.
func TestPredecodedIsBounded(t *testing.T) {
	defer func(b int) { predecodeMaxBytes = b }(predecodeMaxBytes)
	one := len(entryOf(1, "o", 1, createCmd("/n001", bytes.Repeat([]byte{'x'}, 1000))).Data)
	predecodeMaxBytes = 10 * one
	s := newBare("now")
	s.fsm.startPredecode(100)
	var logs []*raft.Log
	for i := uint64(1); i <= 30; i++ {
		l := entryOf(i, "o", i, createCmd(fmt.Sprintf("/n%03d", i), bytes.Repeat([]byte{'x'}, 1000)))
		logs = append(logs, l)
		s.fsm.predecode(l)
	}
	if n, b := len(s.fsm.pre.m), s.fsm.pre.bytes; n != 10 || b != 10*one {
		t.Fatalf("%d entries (%d bytes) wait decoded, want 10 (%d bytes)", n, b, 10*one)
	}
	s.fsm.ApplyBatch(logs[:20])
	if n, b := len(s.fsm.pre.m), s.fsm.pre.bytes; n != 0 || b != 0 {
		t.Fatalf("after the apply %d entries (%d bytes) still wait decoded", n, b)
	}
	for _, l := range logs[20:] {
		s.fsm.predecode(l)
	}
	if n := len(s.fsm.pre.m); n != 10 {
		t.Fatalf("%d entries decoded after the apply freed room, want 10", n)
	}
}
