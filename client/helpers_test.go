package client

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// testLogger routes the client's logs to t.Log until the test ends.
func testLogger(t testing.TB) *slog.Logger {
	h := &tlog{t: t}
	t.Cleanup(func() {
		h.mu.Lock()
		h.done = true
		h.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(h, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlog struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (h *tlog) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dial connects to the servers in order, and closes the Conn when the test
// ends.
func dial(t testing.TB, servers []string, opts ...Option) (*Conn, <-chan Event) {
	t.Helper()
	opts = append([]Option{WithShuffle(false), WithLogger(testLogger(t)), WithBackoff(5*time.Millisecond, 50*time.Millisecond)}, opts...)
	c, events, err := Connect(ctxT(t), servers, opts...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c, events
}

// waitFor polls cond until it holds or the time is up.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// recv reads one event or fails the test.
func recv(t testing.TB, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("channel closed, expected an event")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for an event")
	}
	return Event{}
}

// waitState reads session events until one with state st.
func waitState(t testing.TB, events <-chan Event, st State) Event {
	t.Helper()
	for {
		if ev := recv(t, events); ev.State == st {
			return ev
		}
	}
}

// closed reports whether ch is closed within a while, with no event left.
func closed(t testing.TB, ch <-chan Event) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if ok {
			t.Fatalf("expected the channel closed, got %v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed")
	}
}

// quiet asserts that nothing arrives on ch for a short while.
func quiet(t testing.TB, ch <-chan Event) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		t.Fatalf("unexpected event %v (open=%v)", ev, ok)
	case <-time.After(50 * time.Millisecond):
	}
}
