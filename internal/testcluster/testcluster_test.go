package testcluster_test

import (
	"context"
	"errors"
	"fmt"
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
