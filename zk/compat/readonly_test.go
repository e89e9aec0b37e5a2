package compat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Read-only mode with kazoo (KazooClient(read_only=True)) across a server
// cut off from the quorum in the lab's network namespaces, against coord
// (-read-only-mode) and Apache ZooKeeper 3.8 (-Dreadonlymode.enabled=true).
// testdata/kazoo_readonly.py runs the client; this test drives its phases:
//
//  1. start: a read-only-capable client starts read-write on the victim and
//     creates an ephemeral (so that ZooKeeper, which the test runs with
//     local sessions, makes its session a cluster session).
//  2. isolated: the victim is cut off by iptables; that client is refused
//     there (ZooKeeper 3.8 refuses a cluster session in read-only mode);
//     a new read-only client becomes CONNECTED_RO there, reads, gets
//     NotReadOnly for a write, isro says "ro"; a client that did not ask
//     for read-only gets no session.
//  3. restarted: the victim is killed (SIGKILL) and restarted, still cut
//     off. ZooKeeper loads its whole transaction log and serves the client
//     read-only again; coord applies only its last snapshot at start (it
//     cannot know which logged entries are committed without a leader), so
//     it refuses the client, which has seen more (ZooKeeper's rule for a
//     server behind a client), and serves a new read-only client.
//  4. healed: the client moves to a read-write session by itself and writes.
//  5. killed: three go-zookeeper clients hold sessions (and an ephemeral
//     each) on the victim beside kazoo; the victim is killed and restarted,
//     and they all reconnect at once: kazoo writes again, each go-zookeeper
//     client keeps its session and its ephemeral.
//
// Run it (as root, needs ip and iptables; skips otherwise):
//
//	go test -v -run TestKazooReadOnly ./zk/compat/
//	COORD_COMPAT_TARGET=zookeeper go test -v -run TestKazooReadOnly ./zk/compat/
func TestKazooReadOnly(t *testing.T) {
	requireKazoo(t)
	lab := newNetLab(t, 3)
	o := isoProcOpts(lab)
	if target() == "zookeeper" {
		o.jvmProps = append(o.jvmProps, "-Dreadonlymode.enabled=true")
		// ZooKeeper 3.8's read-only server gives a new client a session
		// only if it is a local session: its ReadOnlyRequestProcessor
		// answers NotReadOnly to a createSession that is not local, and
		// the client never gets a ConnectResponse (read in its bytecode,
		// seen as kazoo stuck in CONNECTING). A session upgrades to a
		// cluster session when it creates an ephemeral.
		o.zooCfg = append(o.zooCfg, "localSessionsEnabled=true", "localSessionsUpgradingEnabled=true")
	} else {
		o.coordArgs = append(o.coordArgs, "-read-only-mode")
	}
	cl := newProcClusterOpts(t, 3, o)
	victim := (cl.Leader() + 1) % 3
	var others []int
	for i := 0; i < 3; i++ {
		if i != victim {
			others = append(others, i)
		}
	}
	t.Logf("%s: isolating server %d (%s)", cl.Name(), victim+1, cl.Addr(victim))

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python3, "testdata/kazoo_readonly.py", cl.Addr(victim), strings.Join(cl.Addrs(), ","))
	stdin, err := cmd.StdinPipe()
	must(t, "stdin", err)
	stdout, err := cmd.StdoutPipe()
	must(t, "stdout", err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, "start kazoo_readonly.py", cmd.Start())
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var oks []string
	phase := func(name string) {
		t.Helper()
		start := time.Now()
		fmt.Fprintln(stdin, name)
		name = strings.Fields(name)[0]
		for {
			select {
			case l, open := <-lines:
				if !open {
					t.Fatalf("kazoo_readonly.py ended during phase %s; stderr:\n%s", name, stderr.String())
				}
				t.Logf("kazoo: %s", l)
				switch {
				case strings.HasPrefix(l, "ok "):
					oks = append(oks, strings.Fields(l)[1])
				case strings.HasPrefix(l, "FAIL "):
					t.Errorf("%s: kazoo: %s", cl.Name(), l)
				case l == "phase "+name+" done":
					t.Logf("%s: phase %s took %v", cl.Name(), name, time.Since(start).Round(time.Millisecond))
					return
				}
			case <-time.After(4 * time.Minute):
				t.Fatalf("phase %s: no end after 4 minutes", name)
			}
		}
	}

	phase("start")
	lab.isolate(victim, others)
	phase("isolated")
	cl.Restart(victim) // SIGKILL; the namespace's iptables rules stay
	if target() == "zookeeper" {
		phase("restarted log")
	} else {
		phase("restarted snapshot")
	}
	lab.heal(victim)
	phase("healed")

	// Read-write clients on the victim beside kazoo, then a crash.
	var gos []*client
	for i := 0; i < 3; i++ {
		c := connectWithin(t, fmt.Sprintf("G%d", i+1), []string{cl.Addr(victim)}, 10*time.Second, isoHealWait)
		p := fmt.Sprintf("/rotest-g%d", i+1)
		retryWrite(t, c, c.name+": create "+p, func() error {
			_, err := c.Create(p, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				return nil
			}
			return err
		})
		gos = append(gos, c)
	}
	ids := make([]int64, len(gos))
	for i, c := range gos {
		ids[i] = c.SessionID()
	}
	cl.Restart(victim)
	var wg sync.WaitGroup
	for i, c := range gos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("/rotest-g%d", i+1)
			deadline := time.Now().Add(isoHealWait)
			for {
				ok, st, err := c.Exists(p)
				if err == nil {
					if !ok || st.EphemeralOwner != ids[i] || c.SessionID() != ids[i] {
						t.Errorf("%s after the crash: exists %s = %v owner %#x, session %#x (had %#x)", c.name, p, ok, st.EphemeralOwner, c.SessionID(), ids[i])
					}
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("%s: no answer within %v of the crash: %v", c.name, isoHealWait, err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	phase("killed")
	wg.Wait()
	stdin.Close()
	for l := range lines {
		t.Logf("kazoo: %s", l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("kazoo_readonly.py: %v; stderr:\n%s", err, tail(stderr.String(), 4000))
	}
	for _, want := range []string{"start_rw", "isolated_connected_ro", "isolated_read", "isolated_write_refused", "isolated_isro",
		"rw_client_refused", "old_session_refused", "old_connected_rw", "restarted_connected_ro", "restarted_read", "restarted_write_refused", "healed_connected_rw",
		"healed_write", "killed_connected_rw", "killed_write"} {
		found := false
		for _, o := range oks {
			found = found || o == want
		}
		if !found {
			t.Errorf("%s: kazoo did not report %q", cl.Name(), want)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
