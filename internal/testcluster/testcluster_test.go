package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"coord/client"
	"coord/internal/testcluster"
	"coord/vocab"
)

// The in-process cluster does what the tests that use it rely on: it
// elects a leader and replicates, a cut-off server falls behind and catches
// up after Heal, a leader cut off from the majority is replaced, and a
// restarted server comes back with what its stores held.
func TestCluster(t *testing.T) {
	c := testcluster.New(t, 3, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, _, err := client.Connect(ctx, c.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Create(ctx, "/n", []byte("0"), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	set := func(v int) { // a set whose server went away is tried again
		t.Helper()
		for {
			_, err := conn.Set(ctx, "/n", []byte(fmt.Sprint(v)), -1)
			if err == nil {
				return
			}
			if !errors.Is(err, vocab.ConnectionLoss) || ctx.Err() != nil {
				t.Fatalf("set %d: %v", v, err)
			}
		}
	}
	// shows waits until server i's state holds /n = want.
	shows := func(i, want int) {
		t.Helper()
		if !c.WaitFor(10*time.Second, func() bool {
			d, _, err := c.Servers[i].View().GetData("/n", nil)
			return err == nil && string(d) == fmt.Sprint(want)
		}) {
			d, _, err := c.Servers[i].View().GetData("/n", nil)
			t.Fatalf("server %d holds %q (%v), want %d", i, d, err, want)
		}
	}

	leader := c.Leader()
	f := (leader + 1) % 3
	c.Isolate(f)
	for v := 1; v <= 20; v++ {
		set(v)
	}
	if d, _, _ := c.Servers[f].View().GetData("/n", nil); string(d) == "20" {
		t.Fatal("an isolated follower applied a write made while it was cut off")
	}
	c.Heal()
	shows(f, 20)

	// The leader on the minority side: the other two elect a new one.
	c.Partition([]int{leader, 3})
	if !c.WaitFor(10*time.Second, func() bool {
		return c.Servers[(leader+1)%3].IsLeader() || c.Servers[(leader+2)%3].IsLeader()
	}) {
		t.Fatal("the majority elected no leader")
	}
	c.Heal()
	set(21)
	for i := range c.Servers {
		shows(i, 21)
	}

	// A restarted server starts from its stores and catches up.
	r := (c.Leader() + 1) % 3
	c.Kill(r)
	set(22)
	c.Restart(r)
	shows(r, 22)
}

// fatalTB records a Fatal while armed (and ends the call by panicking,
// as Fatal ends a test goroutine); otherwise it is the test's.
type fatalTB struct {
	testing.TB
	armed bool
	fatal string
}

type fataled struct{}

func (tb *fatalTB) Fatalf(format string, args ...any) {
	if !tb.armed {
		tb.TB.Helper()
		tb.TB.Fatalf(format, args...)
	}
	tb.fatal = fmt.Sprintf(format, args...)
	panic(fataled{})
}

// fails runs f with tb armed and returns what it fataled with ("" if
// nothing).
func (tb *fatalTB) fails(f func()) (msg string) {
	tb.armed, tb.fatal = true, ""
	defer func() {
		tb.armed = false
		if r := recover(); r != nil {
			if _, ok := r.(fataled); !ok {
				panic(r)
			}
		}
		msg = tb.fatal
	}()
	f()
	return ""
}

// OnTCP: raft on loopback TCP and its stores on disk, for a server New
// starts and for one Add joins (New's tweak applies to it too); a restart
// comes back on the same raft port with what its files hold; and a cut,
// which only the in-memory network can make, fails the test saying so.
func TestOnTCP(t *testing.T) {
	tb := &fatalTB{TB: t}
	c := testcluster.New(tb, 1, 0, testcluster.OnTCP)
	obs := c.Add(true)
	for i, s := range c.Servers {
		if cfg := c.ConfigOf(i); cfg.PeerNetwork != nil || cfg.Stores != nil || !strings.HasPrefix(s.RaftAddr(), "127.0.0.1:") {
			t.Fatalf("server %d: raft at %s, peer network %v, stores %v: not on TCP and disk", i, s.RaftAddr(), cfg.PeerNetwork, cfg.Stores)
		}
	}
	if v, o, err := c.Servers[c.Leader()].RaftConfiguration(); err != nil || len(v) != 1 || len(o) != 1 || o[0] != obs.ID() {
		t.Fatalf("after Add(true): voters %v, non-voters %v (%v), want %s a non-voter", v, o, err, obs.ID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := client.Connect(ctx, c.Addrs()[:1])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Create(ctx, "/n", []byte("x"), vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	raftAddr := obs.RaftAddr()
	r := c.Restart(1)
	if r.RaftAddr() != raftAddr {
		t.Fatalf("restarted on raft address %s, was %s", r.RaftAddr(), raftAddr)
	}
	if !c.WaitFor(10*time.Second, func() bool { _, _, err := r.View().GetData("/n", nil); return err == nil }) {
		t.Fatal("the restarted observer does not hold /n")
	}
	for what, cut := range map[string]func(){"Isolate": func() { c.Isolate(0) }, "Partition": func() { c.Partition([]int{0}) }} {
		if msg := tb.fails(cut); !strings.Contains(msg, what) || !strings.Contains(msg, "OnTCP") {
			t.Errorf("%s on a TCP cluster: fatal %q, want one that names %s and OnTCP", what, msg, what)
		}
	}
}
