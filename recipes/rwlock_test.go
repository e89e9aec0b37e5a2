package recipes_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"coord/recipes"
)

// Readers share, writers exclude everyone, and a waiting writer holds back
// later readers.
func TestRWMutexSemantics(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 4)
		dir := testRoot(t) + "/rw"
		ctx := ctxT(t)
		r1 := recipes.NewRWMutex(cs[0], dir)
		r2 := recipes.NewRWMutex(cs[1], dir)
		w := recipes.NewRWMutex(cs[2], dir)
		r3 := recipes.NewRWMutex(cs[3], dir)
		if err := r1.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r2.RLock(ctx); err != nil { // readers share
			t.Fatal(err)
		}
		wDone := errc(func() error { return w.Lock(ctx) })
		waitChildren(t, cs[0], dir, 3)
		r3Done := errc(func() error { return r3.RLock(ctx) })
		waitChildren(t, cs[0], dir, 4)
		if err := r1.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-wDone:
			t.Fatalf("writer got the lock while a reader held it (%v)", err)
		case err := <-r3Done:
			t.Fatalf("a reader behind a waiting writer got the lock (%v)", err)
		default:
		}
		if err := r2.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := within(t, "the writer", wDone, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-r3Done:
			t.Fatalf("a reader got the lock while the writer held it (%v)", err)
		default:
		}
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := within(t, "the last reader", r3Done, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := r3.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Under contention: a writer is always alone; readers never meet a writer.
func TestRWMutexContention(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const sessions, rounds = 6, 5
		cs := conns(t, c, sessions)
		dir := testRoot(t) + "/rw"
		ctx := ctxT(t)
		var readers, writers atomic.Int32
		run(t, sessions, func(i int) error {
			rw := recipes.NewRWMutex(cs[i], dir)
			for r := 0; r < rounds; r++ {
				if (i+r)%3 == 0 {
					if err := rw.Lock(ctx); err != nil {
						return err
					}
					if w := writers.Add(1); w != 1 || readers.Load() != 0 {
						return fmt.Errorf("writer with %d writers and %d readers", w, readers.Load())
					}
					writers.Add(-1)
					if err := rw.Unlock(ctx); err != nil {
						return err
					}
				} else {
					if err := rw.RLock(ctx); err != nil {
						return err
					}
					readers.Add(1)
					if writers.Load() != 0 {
						return fmt.Errorf("reader with a writer")
					}
					readers.Add(-1)
					if err := rw.RUnlock(ctx); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
}

// A revocable holder hears the request to let go.
func TestRWMutexRevocation(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 2)
		dir := testRoot(t) + "/rw"
		ctx := ctxT(t)
		r := recipes.NewRWMutex(cs[0], dir, recipes.WithRevocation())
		if err := r.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		revoked := r.Revoked(true)
		w := recipes.NewRWMutex(cs[1], dir)
		wDone := errc(func() error { return w.Lock(ctx) })
		waitChildren(t, cs[1], dir, 2)
		if n, err := recipes.RevokeHolders(ctx, cs[1], dir); err != nil || n != 1 {
			t.Fatalf("RevokeHolders = %d, %v", n, err)
		}
		within(t, "revocation", revoked, 30*time.Second)
		if err := r.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := within(t, "the writer", wDone, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		_ = w.Unlock(ctx)
	})
}

// At most max leases at a time.
func TestSemaphore(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const sessions, rounds, max = 8, 4, 3
		cs := conns(t, c, sessions)
		dir := testRoot(t) + "/sem"
		ctx := ctxT(t)
		var held, peak atomic.Int32
		run(t, sessions, func(i int) error {
			s := recipes.NewSemaphore(cs[i], dir, max)
			for r := 0; r < rounds; r++ {
				l, err := s.Acquire(ctx)
				if err != nil {
					return err
				}
				n := held.Add(1)
				if n > max {
					return fmt.Errorf("%d leases held, max %d", n, max)
				}
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				held.Add(-1)
				if err := l.Release(ctx); err != nil {
					return err
				}
			}
			return nil
		})
		t.Logf("peak leases held: %d of %d", peak.Load(), max)

		// max leases are given at once; the next waits for a release.
		var leases []*recipes.Lease
		for i := 0; i < max; i++ {
			l, err := recipes.NewSemaphore(cs[i], dir, max).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if _, err := recipes.NewSemaphore(cs[max], dir, max).Acquire(short); err == nil {
			t.Fatal("a lease beyond max")
		}
		type res struct {
			l   *recipes.Lease
			err error
		}
		got := make(chan res, 1)
		go func() {
			l, err := recipes.NewSemaphore(cs[max], dir, max).Acquire(ctx)
			got <- res{l, err}
		}()
		if err := leases[1].Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := within(t, "a lease after a release", got, 30*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, l := range append(leases, r.l) {
			_ = l.Release(ctx)
		}
	})
}

// waitChildren waits until dir has n children, on child watches.
func waitChildren(t testing.TB, c recipes.Conn, dir string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		kids, _, w, err := c.ChildrenW(ctx, dir)
		if err == nil && len(kids) == n {
			return
		}
		if err != nil {
			// The directory may not exist yet: wait for it.
			_, _, w, err = c.ExistsW(ctx, dir)
			if err != nil {
				t.Fatalf("children %s: %v", dir, err)
			}
		}
		select {
		case <-w:
		case <-ctx.Done():
			t.Fatalf("%s has %d children, want %d", dir, len(kids), n)
		}
	}
}
