package sessions

import (
	"fmt"
	"testing"
	"time"

	"coord/fsm"
)

// Sessions that expire together are closed at most maxClosesInFlight at a
// time, so a client write proposed meanwhile waits behind that many closes,
// not behind all of them; the rest follow as the closes apply.
func TestExpiryKeepsFewClosesInFlight(t *testing.T) {
	w := newWorld(t, "expiry")
	defer w.close()
	const n = maxClosesInFlight + maxClosesInFlight/2
	w.run("connect writer timeout=20000")
	w.run("writer create /x v0")
	for i := range n {
		w.run(fmt.Sprintf("connect s%d timeout=2000", i))
	}
	w.settle()
	w.run("hold")
	w.run("tick 5s") // past the 2 s sessions' deadline, not the writer's
	w.run("writer setData /x v1")
	w.settle()
	closesBefore := func() (closes int, write bool) {
		for _, cmd := range w.rep.pendingCommands() {
			if cmd.Type == fsm.CmdSetData {
				return closes, true
			}
			if cmd.Type == fsm.CmdCloseSession {
				closes++
			}
		}
		return closes, false
	}
	if closes, write := closesBefore(); !write || closes != maxClosesInFlight {
		t.Fatalf("the write is in the log behind %d closes (in the log: %v), want %d", closes, write, maxClosesInFlight)
	}
	// As the closes apply, the rest are proposed.
	w.run(fmt.Sprintf("apply %d", maxClosesInFlight+1))
	deadline := time.Now().Add(5 * time.Second)
	for {
		closes, _ := closesBefore()
		if closes == n-maxClosesInFlight {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d closes in the log after the first %d applied, want %d", closes, maxClosesInFlight, n-maxClosesInFlight)
		}
		time.Sleep(time.Millisecond)
	}
	w.run("release")
	if got := w.l.Sessions(); got != 1 {
		t.Fatalf("%d sessions left, want the writer's alone", got)
	}
}
