package recipes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"coord/recipes"
)

// A session that stops reaching the servers expires, and everything that
// hung on it moves on: its lock passes to the next waiter (with a larger
// fencing token), its membership disappears, its double-barrier entry no
// longer holds back the others' Leave, and a queue item it had claimed is
// taken by another consumer. The victim learns that it lost all of it.
func TestSessionExpiry(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		ctx := ctxT(t)
		root := testRoot(t)
		proxies := &proxySet{}
		victim := c.connect(t, connOpts{timeout: time.Second, proxied: proxies, server: -1})
		cs := conns(t, c, 5)

		// The victim holds a lock, is a member, has entered a double
		// barrier and claimed a queue item.
		vm := recipes.NewMutex(victim, root+"/lock")
		if err := vm.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		vToken, vLost := vm.Token(), vm.Lost()
		if _, err := recipes.NewGroup(victim, root+"/group").Join(ctx, "victim", nil); err != nil {
			t.Fatal(err)
		}
		gw, err := recipes.NewGroup(cs[1], root+"/group").Watch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer gw.Close(ctx)
		until(t, "the victim's membership", gw.Changed, func() bool { _, ok := gw.Members()["victim"]; return ok })
		partner := recipes.NewDoubleBarrier(cs[2], root+"/barrier", 2)
		entered := errc(func() error { return partner.Enter(ctx) })
		if err := recipes.NewDoubleBarrier(victim, root+"/barrier", 2).Enter(ctx); err != nil {
			t.Fatal(err)
		}
		if err := within(t, "the partner entering", entered, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := recipes.NewQueue(cs[3], root+"/queue").Offer(ctx, []byte("job")); err != nil {
			t.Fatal(err)
		}
		vq := recipes.NewQueue(victim, root+"/queue")
		claim, err := vq.Claim(ctx)
		if err != nil || string(claim.Data) != "job" {
			t.Fatalf("victim's Claim = %v %v", claim, err)
		}

		// Everybody else waits on the victim.
		waiter := recipes.NewMutex(cs[0], root+"/lock")
		locked := errc(func() error { return waiter.Lock(ctx) })
		left := errc(func() error { return partner.Leave(ctx) })
		consumer := recipes.NewQueue(cs[4], root+"/queue")
		defer consumer.Close(ctx)
		taken := make(chan []byte, 1)
		go func() {
			d, err := consumer.Take(ctx)
			if err != nil {
				t.Error(err)
			}
			taken <- d
		}()

		proxies.freeze() // the victim goes silent: its session expires
		if err := within(t, "the lock passing on", locked, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if waiter.Token() <= vToken {
			t.Fatalf("fencing token %d after the victim's %d", waiter.Token(), vToken)
		}
		until(t, "the victim leaving the group", gw.Changed, func() bool { _, ok := gw.Members()["victim"]; return !ok })
		if err := within(t, "the partner leaving the barrier", left, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if d := within(t, "the claimed item taken by another", taken, 60*time.Second); string(d) != "job" {
			t.Fatalf("consumer took %q", d)
		}

		// The victim learns it lost everything.
		proxies.thaw()
		waitState(t, victim, recipes.StateExpired, 60*time.Second)
		within(t, "the victim's Lost", vLost, 30*time.Second)
		if err := vm.Unlock(ctx); !errors.Is(err, recipes.ErrSessionLost) {
			t.Fatalf("victim's Unlock: %v, want ErrSessionLost", err)
		}
		if err := claim.Ack(ctx); err == nil {
			t.Fatal("Ack of a claim lost with the session succeeded")
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// When the server a lock holder is attached to dies, the holder's session
// moves to another server and keeps everything: the lock stays held (no one
// else gets it), the membership and the claim stay, and the holder can
// still release and acknowledge.
func TestServerKilled(t *testing.T) {
	bothOwn(t, func(t *testing.T, c cluster) {
		ctx := ctxT(t)
		root := testRoot(t)
		holder := c.connect(t, defaultConn())
		victimServer := c.serverOf(t, holder)
		var others []recipes.Conn
		for try := 0; len(others) < 2; try++ {
			if try == 30 {
				t.Fatal("no session landed on another server")
			}
			o := c.connect(t, defaultConn())
			if c.serverOf(t, o) != victimServer {
				others = append(others, o)
			}
		}
		m := recipes.NewMutex(holder, root+"/lock")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := recipes.NewGroup(holder, root+"/group").Join(ctx, "holder", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := recipes.NewQueue(others[0], root+"/queue").Offer(ctx, []byte("job")); err != nil {
			t.Fatal(err)
		}
		claim, err := recipes.NewQueue(holder, root+"/queue").Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waiter := recipes.NewMutex(others[0], root+"/lock")
		locked := errc(func() error { return waiter.Lock(ctx) })

		c.kill(victimServer)
		waitState(t, holder, recipes.StateReconnected, 60*time.Second)

		if ok, err := recipes.NewMutex(others[1], root+"/lock").TryLock(ctx); ok || err != nil {
			t.Fatalf("TryLock while the holder's session lives: %v %v", ok, err)
		}
		select {
		case err := <-locked:
			t.Fatalf("the waiter got the lock while the holder's session lives (%v)", err)
		default:
		}
		waitFor(t, others[1], root+"/group", func() bool {
			ms, err := recipes.NewGroup(others[1], root+"/group").Members(ctx)
			return err == nil && len(ms) == 1
		})
		if err := claim.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := within(t, "the waiter", locked, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := recipes.NewQueue(others[1], root+"/queue").Poll(short); !errors.Is(err, recipes.ErrEmpty) {
			t.Fatalf("queue after the Ack: %v", err)
		}
		_ = waiter.Unlock(ctx)
	})
}
