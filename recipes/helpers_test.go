package recipes_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coord/recipes"
	"coord/vocab"
)

// conns opens n sessions spread over the cluster's servers.
func conns(t testing.TB, c cluster, n int) []recipes.Conn {
	t.Helper()
	out := make([]recipes.Conn, n)
	var wg sync.WaitGroup
	errs := make(chan any, n)
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs <- r
				}
			}()
			out[i] = c.connect(t, defaultConn())
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	return out
}

// run starts f on n goroutines and waits for them, failing the test with
// the first error.
func run(t testing.TB, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// within waits for ch to close or deliver, failing after d.
func within[T any](t testing.TB, what string, ch <-chan T, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
	var zero T
	return zero
}

// errc runs f on a goroutine and returns its result's channel.
func errc(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// waitState waits until the session reaches state want.
func waitState(t testing.TB, c recipes.Conn, want recipes.SessionState, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		st, changed := c.State()
		if st == want {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("session state %v, want %v after %v", st, want, d)
		}
	}
}

// countConn counts the watch notifications its session receives and the
// watches it sets: the herd tests' probe.
type countConn struct {
	recipes.Conn
	p *probe
}

type probe struct {
	events  atomic.Int64
	watches atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	target  int64
	reached chan struct{}
}

func newProbe(target int64) *probe { return &probe{target: target, reached: make(chan struct{})} }

func (p *probe) watched() {
	if p.watches.Add(1) == p.target {
		close(p.reached)
	}
}

func (p *probe) wrap(w <-chan recipes.Event) <-chan recipes.Event {
	if w == nil {
		return nil
	}
	p.watched()
	out := make(chan recipes.Event, 1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(out)
		ev, ok := <-w
		if !ok {
			return
		}
		if ev.Type != recipes.EventNotWatching {
			p.events.Add(1)
		}
		out <- ev
	}()
	return out
}

func (c countConn) GetW(ctx context.Context, path string) ([]byte, vocab.Stat, <-chan recipes.Event, error) {
	d, st, w, err := c.Conn.GetW(ctx, path)
	return d, st, c.p.wrap(w), err
}

func (c countConn) ExistsW(ctx context.Context, path string) (bool, vocab.Stat, <-chan recipes.Event, error) {
	ok, st, w, err := c.Conn.ExistsW(ctx, path)
	return ok, st, c.p.wrap(w), err
}

func (c countConn) ChildrenW(ctx context.Context, path string) ([]string, vocab.Stat, <-chan recipes.Event, error) {
	k, st, w, err := c.Conn.ChildrenW(ctx, path)
	return k, st, c.p.wrap(w), err
}

// closeConn ends a session as its owner would (Close: ephemerals deleted).
func closeConn(t testing.TB, c recipes.Conn) {
	t.Helper()
	switch x := c.(type) {
	case interface{ Close(context.Context) error }:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = x.Close(ctx)
	case interface{ Close() }:
		x.Close()
	case countConn:
		closeConn(t, x.Conn)
	default:
		t.Fatalf("cannot close %T", c)
	}
}

// waitFor waits until cond holds, re-checking it whenever the children of
// dir change (on a child watch set before each check).
func waitFor(t testing.TB, c recipes.Conn, dir string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, _, w, err := c.ChildrenW(ctx, dir)
		if errors.Is(err, vocab.NoNode) {
			// c's server has not applied dir's creation yet: wait for it.
			var ok bool
			ok, _, w, err = c.ExistsW(ctx, dir)
			if ok {
				continue
			}
		}
		if err != nil {
			t.Fatalf("children %s: %v", dir, err)
		}
		if cond() {
			return
		}
		select {
		case <-w:
		case <-ctx.Done():
			t.Fatalf("condition on %s not met in time", dir)
		}
	}
}
