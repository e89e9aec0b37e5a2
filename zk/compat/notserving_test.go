package compat

import (
	"strings"
	"testing"
	"time"
)

// A server that has lost its quorum (here: the other two of three are
// gone) stops serving, and the four-letter words say so as ZooKeeper's do.
func TestFourLetterWordsNotServing(t *testing.T) {
	cl := newCluster(t, 3)
	const lone = 2
	for i := 0; i < cl.Size(); i++ {
		if i != lone {
			cl.Kill(i)
		}
	}
	addr := cl.Addr(lone)
	const notServing = "This ZooKeeper instance is not currently serving requests\n"
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := fourLetter(addr, "srvr", wait)
		if out == notServing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("srvr on a server without a quorum still answers %q", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, cmd := range []string{"srvr", "stat", "cons", "mntr", "conf", "dump", "wchs", "wchc", "wchp", "srst", "crst", "dirs"} {
		if out, err := fourLetter(addr, cmd, wait); out != notServing {
			t.Errorf("%s without a quorum: %q (%v), want %q", cmd, out, err, notServing)
		}
	}
	for cmd, want := range map[string]string{"ruok": "imok", "isro": "null"} {
		if out, err := fourLetter(addr, cmd, wait); out != want {
			t.Errorf("%s without a quorum: %q (%v), want %q", cmd, out, err, want)
		}
	}
	if out, err := fourLetter(addr, "envi", wait); !strings.HasPrefix(out, "Environment:\n") {
		t.Errorf("envi without a quorum: %q (%v)", out, err)
	}
}
