package client

import (
	"context"
	"testing"
	"time"

	"coord/internal/testcluster"
	"coord/vocab"
)

// WithMaxRetries bounds Connect, not an established session: with one try
// per round, a session whose only server restarts is tried until the server
// takes it back (it was reported Expired after the first refused dial).
func TestMaxRetriesKeepsEstablishedSession(t *testing.T) {
	tc := testcluster.New(t, 1, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A short dial timeout, so that a try during the restart fails rather
	// than wait for the server; Connect is tried again if a loaded machine
	// makes it miss the first time.
	var c *Conn
	var events <-chan Event
	var err error
	for try := 0; ; try++ {
		c, events, err = Connect(ctx, tc.Addrs(), WithMaxRetries(1), WithSessionTimeout(10*time.Second),
			WithDialTimeout(50*time.Millisecond), WithBackoff(5*time.Millisecond, 50*time.Millisecond))
		if err == nil {
			break
		}
		if try == 20 {
			t.Fatal(err)
		}
	}
	defer c.Close(ctx)
	if _, err := c.Create(ctx, "/kept", []byte("x"), vocab.ModeEphemeral, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	id := c.SessionID()
	tc.Restart(0)
	waitState(t, events, StateDisconnected)
	if ev := waitState(t, events, StateConnected); c.SessionID() != id {
		t.Fatalf("after the restart: %+v, session %#x, want %#x", ev, c.SessionID(), id)
	}
	if data, _, err := c.Get(ctx, "/kept"); err != nil || string(data) != "x" {
		t.Fatalf("the session's ephemeral after its server restarted: %q %v", data, err)
	}
}
