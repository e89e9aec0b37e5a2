package recipes_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"coord/recipes"
)

// A barrier holds every waiter until it is removed, then releases all.
func TestBarrier(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const waiters = 5
		cs := conns(t, c, waiters+1)
		path := testRoot(t) + "/barrier"
		ctx := ctxT(t)
		if err := recipes.NewBarrier(cs[0], path).Set(ctx); err != nil {
			t.Fatal(err)
		}
		p := newProbe(waiters)
		var passed atomic.Int32
		done := make(chan error, waiters)
		for i := 1; i <= waiters; i++ {
			// A session whose server has not applied the Set yet would
			// rightly find no barrier: wait until each sees it.
			waitFor(t, cs[i], testRoot(t), func() bool {
				ok, _, err := cs[i].Exists(ctx, path)
				return err == nil && ok
			})
			b := recipes.NewBarrier(countConn{cs[i], p}, path)
			go func() {
				err := b.Wait(ctx)
				passed.Add(1)
				done <- err
			}()
		}
		within(t, "every waiter watching", p.reached, 30*time.Second)
		if n := passed.Load(); n != 0 {
			t.Fatalf("%d waiters passed a barrier that is up", n)
		}
		if err := recipes.NewBarrier(cs[0], path).Remove(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < waiters; i++ {
			if err := within(t, "a waiter", done, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A double barrier lets its participants in only when all have come, and
// out only when all have left; it can be used again.
func TestDoubleBarrier(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const size = 5
		cs := conns(t, c, size)
		dir := testRoot(t) + "/double"
		ctx := ctxT(t)
		for round := 0; round < 2; round++ {
			p := newProbe(size - 1)
			bs := make([]*recipes.DoubleBarrier, size)
			for i := range bs {
				bs[i] = recipes.NewDoubleBarrier(countConn{cs[i], p}, dir, size, recipes.WithData([]byte(fmt.Sprint(i))))
			}
			var entered atomic.Int32
			done := make(chan error, size)
			for i := 0; i < size-1; i++ {
				go func() {
					err := bs[i].Enter(ctx)
					entered.Add(1)
					done <- err
				}()
			}
			// Each of the first size-1 watches for ready before it counts.
			within(t, "the first participants waiting", p.reached, 30*time.Second)
			waitChildren(t, cs[0], dir, size-1)
			if n := entered.Load(); n != 0 {
				t.Fatalf("round %d: %d participants entered before the barrier filled", round, n)
			}
			if err := bs[size-1].Enter(ctx); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < size-1; i++ {
				if err := within(t, "a participant entering", done, 30*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			// Leave: the first size-1 leave, and wait for the last.
			var left atomic.Int32
			for i := 0; i < size-1; i++ {
				go func() {
					err := bs[i].Leave(ctx)
					left.Add(1)
					done <- err
				}()
			}
			// All but the lowest delete their nodes; the lowest and the last
			// participant remain.
			waitChildren(t, cs[0], dir, 3) // two participants and ready
			if n := left.Load(); n != 0 {
				t.Fatalf("round %d: %d participants left before the last one did", round, n)
			}
			if err := bs[size-1].Leave(ctx); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < size-1; i++ {
				if err := within(t, "a participant leaving", done, 30*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			waitChildren(t, cs[0], dir, 0)
		}
	})
}
