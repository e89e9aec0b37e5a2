package recipes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"coord/recipes"
)

// One leader at a time; when the leader's session ends its successor
// leads, and everybody can read who leads.
func TestElection(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const n = 6
		cs := conns(t, c, n)
		observer := c.connect(t, defaultConn())
		dir := testRoot(t) + "/election"
		ctx := ctxT(t)
		es := make([]*recipes.Election, n)
		for i := range es {
			es[i] = recipes.NewElection(cs[i], dir, recipes.WithData([]byte(fmt.Sprint("candidate-", i))))
			if err := es[i].Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		alive := map[int]bool{}
		for i := range es {
			alive[i] = true
		}
		for round := 0; round < n; round++ {
			// Wait for a leader among the live candidates.
			leader := -1
			for leader < 0 {
				var changes []<-chan struct{}
				for i := range es {
					if !alive[i] {
						continue
					}
					l, ch := es[i].Leadership()
					if l {
						if leader >= 0 {
							t.Fatalf("round %d: candidates %d and %d both lead", round, leader, i)
						}
						leader = i
					}
					changes = append(changes, ch)
				}
				if leader < 0 {
					waitAny(t, changes, 30*time.Second)
				}
			}
			// Another session's view catches up with the change.
			waitFor(t, observer, dir, func() bool {
				id, err := recipes.CurrentLeader(ctx, observer, dir)
				return err == nil && string(id) == fmt.Sprint("candidate-", leader)
			})
			if round%2 == 0 {
				closeConn(t, cs[leader]) // the leader's session ends
				if es[leader].IsLeader() {
					t.Fatal("a candidate whose session is closed still says it leads")
				}
			} else if err := es[leader].Resign(ctx); err != nil {
				t.Fatal(err)
			}
			alive[leader] = false
		}
		waitFor(t, observer, dir, func() bool {
			_, err := recipes.CurrentLeader(ctx, observer, dir)
			return err != nil
		})
	})
}

// waitAny waits until one of chs is closed.
func waitAny(t testing.TB, chs []<-chan struct{}, d time.Duration) {
	t.Helper()
	any := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range chs {
		go func() {
			select {
			case <-ch:
				select {
				case any <- struct{}{}:
				case <-stop:
				}
			case <-stop:
			}
		}()
	}
	within(t, "a change of leadership", any, d)
}

// A leader's exit wakes its successor only: 50 exits in a chain cost O(50)
// notifications.
func TestElectionHerd(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const n = 50
		cs := conns(t, c, n)
		dir := testRoot(t) + "/election"
		ctx := ctxT(t)
		p := newProbe(n) // n-1 followers watch a predecessor, the leader its own node
		es := make([]*recipes.Election, n)
		for i := range es {
			es[i] = recipes.NewElection(countConn{cs[i], p}, dir)
			if err := es[i].Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		within(t, "every candidate watching", p.reached, 60*time.Second)
		before := p.events.Load()
		done := make(chan error, n)
		for i := range es {
			go func() {
				err := es[i].Await(ctx)
				if err == nil {
					err = es[i].Resign(ctx)
				}
				done <- err
			}()
		}
		for i := 0; i < n; i++ {
			if err := within(t, "a leader", done, 60*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		got := p.events.Load() - before
		t.Logf("%d leader exits caused %d notifications (%d watches set)", n, got, p.watches.Load())
		if got > 3*n {
			t.Fatalf("%d exits caused %d notifications: a herd", n, got)
		}
	})
}

// A latch awaits leadership and passes it on when closed.
func TestLeaderLatch(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 2)
		dir := testRoot(t) + "/latch"
		ctx := ctxT(t)
		a := recipes.NewLeaderLatch(cs[0], dir)
		b := recipes.NewLeaderLatch(cs[1], dir)
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Await(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(ctx); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if err := b.Await(short); err == nil || b.HasLeadership() {
			t.Fatal("two latches lead")
		}
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Await(ctx); err != nil {
			t.Fatal(err)
		}
		if a.HasLeadership() {
			t.Fatal("a closed latch leads")
		}
		_ = b.Close(ctx)
	})
}
