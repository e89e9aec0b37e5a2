package recipes_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"coord/recipes"
	"coord/recipes/coordconn"
	"coord/recipes/zkconn"
	"coord/vocab"
)

// closer is a recipes.Conn with the adapters' Close.
type closer interface {
	recipes.Conn
	Close(ctx context.Context) error
}

var (
	_ closer = (*coordconn.Conn)(nil)
	_ closer = (*zkconn.Conn)(nil)
)

// TestAdapterClose checks that both adapters' Close mean the same: the
// session's ephemerals go at once (well before the session timeout), the
// Conn is finished (StateClosed, calls fail with recipes.ErrClosed), a
// second and concurrent Closes return nil, and a Close whose context has
// ended returns an error wrapping the context's error and still finishes
// the Conn. It runs coordconn on coord, zkconn on coord's ZooKeeper port and
// zkconn on Apache ZooKeeper.
func TestAdapterClose(t *testing.T) {
	dial := func(t *testing.T, connect func(ctx context.Context) (closer, error)) closer {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	coordDial := func(t *testing.T) closer {
		addrs := sharedCoord(t).(*coordCluster).tc.Addrs()
		return dial(t, func(ctx context.Context) (closer, error) { return coordconn.Connect(ctx, addrs) })
	}
	zkDial := func(addrs func(t *testing.T) []string) func(t *testing.T) closer {
		return func(t *testing.T) closer {
			a := addrs(t)
			return dial(t, func(ctx context.Context) (closer, error) {
				return zkconn.Connect(ctx, a, zkconn.Options{SessionTimeout: 20 * time.Second, Logger: testLogger()})
			})
		}
	}
	t.Run("coordconn", func(t *testing.T) { testAdapterClose(t, coordDial) })
	t.Run("zkconn-coord", func(t *testing.T) {
		testAdapterClose(t, zkDial(func(t *testing.T) []string { return sharedCoord(t).(*coordCluster).tc.ZKAddrs() }))
	})
	t.Run("zkconn-zookeeper", func(t *testing.T) {
		testAdapterClose(t, zkDial(func(t *testing.T) []string { return sharedZK(t).(*zkClusterB).zc.Addrs() }))
	})
}

func testAdapterClose(t *testing.T, open func(t *testing.T) closer) {
	ctx := ctxT(t)
	root := testRoot(t)
	a, watcher := open(t), open(t)
	if _, err := a.Create(ctx, root, nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil && !errors.Is(err, vocab.NodeExists) {
		t.Fatal(err)
	}
	eph := root + "/eph"
	if _, err := a.Create(ctx, eph, nil, vocab.ModeEphemeral, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}

	// Close deletes the ephemerals at once: the session timeout is 10 s
	// or more, the node must be gone well before.
	if err := a.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		ok, _, err := watcher.Exists(ctx, eph)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed session's ephemeral is still there after 3 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	finished(t, ctx, a)

	// Idempotent, also concurrently.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Close(ctx); err != nil {
				t.Errorf("second Close: %v", err)
			}
		}()
	}
	wg.Wait()

	// A Close whose context has ended reports it and still finishes the
	// Conn.
	b := open(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Close(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended context: %v, want context.Canceled", err)
	}
	finished(t, ctx, b)
	if err := b.Close(ctx); err != nil {
		t.Fatalf("Close after a failed Close: %v", err)
	}
}

// finished checks that c is closed: StateClosed and calls fail with
// recipes.ErrClosed.
func finished(t *testing.T, ctx context.Context, c closer) {
	t.Helper()
	if st, _ := c.State(); st != recipes.StateClosed {
		t.Fatalf("state after Close: %v, want Closed", st)
	}
	if _, _, err := c.Get(ctx, "/"); !errors.Is(err, recipes.ErrClosed) {
		t.Fatalf("Get after Close: %v, want recipes.ErrClosed", err)
	}
}
