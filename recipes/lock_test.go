package recipes_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coord/recipes"
)

// Many sessions contend for one lock: the critical section is never
// shared, fencing tokens grow with every acquisition, and re-entry works.
func TestMutexContention(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const sessions, rounds = 8, 6
		cs := conns(t, c, sessions)
		dir := testRoot(t) + "/lock"
		ctx := ctxT(t)
		var inside atomic.Int32
		var mu sync.Mutex
		var tokens []int64
		run(t, sessions, func(i int) error {
			m := recipes.NewMutex(cs[i], dir, recipes.WithData([]byte(fmt.Sprint(i))))
			for r := 0; r < rounds; r++ {
				if err := m.Lock(ctx); err != nil {
					return err
				}
				if err := m.Lock(ctx); err != nil { // re-entry
					return err
				}
				if n := inside.Add(1); n != 1 {
					return fmt.Errorf("%d holders in the critical section", n)
				}
				mu.Lock()
				tokens = append(tokens, m.Token())
				mu.Unlock()
				inside.Add(-1)
				if err := m.Unlock(ctx); err != nil {
					return err
				}
				if !m.IsHeld() {
					return errors.New("first Unlock of a re-entered lock released it")
				}
				if err := m.Unlock(ctx); err != nil {
					return err
				}
				if err := m.Unlock(ctx); !errors.Is(err, recipes.ErrLockNotHeld) {
					return fmt.Errorf("extra Unlock: %v, want ErrLockNotHeld", err)
				}
			}
			return nil
		})
		if len(tokens) != sessions*rounds {
			t.Fatalf("%d acquisitions, want %d", len(tokens), sessions*rounds)
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("fencing token %d after %d: not increasing", tokens[i], tokens[i-1])
			}
		}
		waitChildren(t, cs[0], dir, 0) // no lock node left behind
	})
}

// TryLock does not wait; Lock with a deadline gives up and leaves no node.
func TestMutexTryLockAndTimeout(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 2)
		dir := testRoot(t) + "/lock"
		ctx := ctxT(t)
		a := recipes.NewMutex(cs[0], dir, recipes.WithData([]byte("a")))
		b := recipes.NewMutex(cs[1], dir)
		if ok, err := a.TryLock(ctx); !ok || err != nil {
			t.Fatalf("TryLock on a free lock: %v %v", ok, err)
		}
		waitFor(t, cs[1], dir, func() bool { // (b's server catches up with a's lock)
			h, err := recipes.LockHolder(ctx, cs[1], dir)
			return err == nil && string(h) == "a"
		})
		if ok, err := b.TryLock(ctx); ok || err != nil {
			t.Fatalf("TryLock on a held lock: %v %v", ok, err)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := b.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with a deadline: %v", err)
		}
		if kids, _, err := cs[1].Children(ctx, dir); err != nil || len(kids) != 1 { // b sees its own delete
			t.Fatalf("nodes after the timed-out Lock: %v %v", kids, err)
		}
		done := errc(func() error { return b.Lock(ctx) })
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := within(t, "b's Lock", done, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := b.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// One release wakes one waiter: with 50 waiters queued, releasing the lock
// 50 times in a chain causes about 50 watch notifications, not 50²/2.
func TestMutexHerd(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const waiters = 50
		cs := conns(t, c, waiters+1)
		dir := testRoot(t) + "/lock"
		ctx := ctxT(t)
		holder := recipes.NewMutex(cs[0], dir)
		if err := holder.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		p := newProbe(waiters)
		var order []int
		var mu sync.Mutex
		done := make(chan error, waiters)
		for i := 1; i <= waiters; i++ {
			m := recipes.NewMutex(countConn{cs[i], p}, dir)
			go func() {
				err := m.Lock(ctx)
				if err == nil {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					err = m.Unlock(ctx)
				}
				done <- err
			}()
		}
		within(t, "every waiter watching", p.reached, 60*time.Second)
		before := p.events.Load()
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < waiters; i++ {
			if err := within(t, "a waiter", done, 60*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		n := p.events.Load() - before
		t.Logf("%d releases woke %d watchers (%d watches set)", waiters, n, p.watches.Load())
		if n > 2*waiters {
			t.Fatalf("%d releases caused %d notifications: a herd", waiters, n)
		}
	})
}
