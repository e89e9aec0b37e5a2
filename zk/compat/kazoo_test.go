package compat

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// python3 is Debian's, where apt's python3-kazoo lives (a python3 earlier
// on PATH, say from pyenv, would not see it).
const python3 = "/usr/bin/python3"

func requireKazoo(t testing.TB) {
	t.Helper()
	if err := exec.Command(python3, "-c", "import kazoo").Run(); err != nil {
		t.Skipf("%s cannot import kazoo (apt-get install python3-kazoo): %v", python3, err)
	}
}

// runKazoo runs a script from testdata against addrs and checks that it
// reports every check in want.
func runKazoo(t *testing.T, script string, addrs []string, want []string) {
	t.Helper()
	runKazooArgs(t, script, []string{strings.Join(addrs, ",")}, want)
}

// runKazooArgs is runKazoo with the script's arguments given.
func runKazooArgs(t *testing.T, script string, args []string, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, python3, append([]string{"testdata/" + script}, args...)...).CombinedOutput()
	t.Logf("%s (%v):\n%s", script, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	for _, w := range want {
		if !strings.Contains(string(out), "ok "+w) {
			t.Errorf("%s did not report %q", script, w)
		}
	}
}

// kazoo, a client we did not write, against one server: CRUD, errors,
// sequential and ephemeral nodes, DataWatch/ChildrenWatch and one-shot
// watches, transactions, ACLs, the Counter recipe, four-letter words.
func TestKazooBasics(t *testing.T) {
	requireKazoo(t)
	cl := newCluster(t, 1)
	runKazoo(t, "kazoo_basic.py", cl.Addrs(), []string{"crud", "sequential_and_ephemeral", "watches",
		"transactions", "acls", "counter", "four_letter_words"})
}

// kazoo's recipes with several concurrent clients spread over a 3-server
// cluster: Lock (mutual exclusion, no lost update, release on session end),
// Election (one leader at a time, failover), Barrier and DoubleBarrier,
// Queue (exactly once, in order) and LockingQueue.
func TestKazooRecipes(t *testing.T) {
	requireKazoo(t)
	cl := newCluster(t, 3)
	runKazoo(t, "kazoo_recipes.py", cl.Addrs(), []string{"lock", "election", "barrier", "queue"})
}
