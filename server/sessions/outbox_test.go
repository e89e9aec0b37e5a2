package sessions

import (
	"slices"
	"testing"
	"time"
)

// Replies leave in request order whatever order they are filled in, and
// events go out as they come, between replies already released.
func TestOutboxOrder(t *testing.T) {
	o := newOutbox(100, 1<<20, nil)
	a, b, c := o.reserve(), o.reserve(), o.reserve()
	o.fill(c, &Reply{Xid: 3})
	o.fill(b, &Reply{Xid: 2})
	o.push(&Event{Path: "/e1"})
	o.fill(a, &Reply{Xid: 1})
	o.push(&Event{Path: "/e2"})
	msgs, ok := o.next()
	if !ok {
		t.Fatal("outbox closed")
	}
	var got []string
	for _, m := range msgs {
		switch m := m.(type) {
		case *Reply:
			got = append(got, string(rune('0'+m.Xid)))
		case *Event:
			got = append(got, m.Path)
		}
	}
	if want := []string{"/e1", "1", "2", "3", "/e2"}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// A connection holding max messages takes no more requests until its
// writer has written what it took; events never wait.
func TestOutboxBackPressure(t *testing.T) {
	var throttled []bool
	o := newOutbox(2, 1<<20, func(start bool) { throttled = append(throttled, start) })
	o.fill(o.reserve(), &Reply{Xid: 1})
	o.fill(o.reserve(), &Reply{Xid: 2})
	o.push(&Event{Path: "/never-waits"})
	got := make(chan *slot)
	go func() { got <- o.reserve() }()
	select {
	case <-got:
		t.Fatal("a third request was taken while two replies were unsent")
	case <-time.After(50 * time.Millisecond):
	}
	msgs, _ := o.next()
	if len(msgs) != 3 {
		t.Fatalf("next gave %d messages, want 3", len(msgs))
	}
	o.written()
	select {
	case sl := <-got:
		if sl == nil {
			t.Fatal("reserve gave no slot")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request still waits after the replies were written")
	}
	if len(throttled) != 2 || !throttled[0] || throttled[1] {
		t.Fatalf("throttle calls %v, want [true false]", throttled)
	}
	o.close(nil)
	if o.reserve() != nil {
		t.Fatal("a closed outbox gave a slot")
	}
}

// A writer that parks has no goroutine while nothing is ready: the box
// starts it again, once, when a message is ready (an event, or a reply
// whose turn came) and when the box closes; a reply waiting for an
// earlier one does not start it.
func TestOutboxParkedWriter(t *testing.T) {
	o := newOutbox(100, 1<<20, nil)
	starts := make(chan struct{}, 10)
	start := func() { starts <- struct{}{} }
	started := func(want bool, what string) {
		t.Helper()
		select {
		case <-starts:
			if !want {
				t.Fatalf("%s started the parked writer", what)
			}
		case <-time.After(50 * time.Millisecond):
			if want {
				t.Fatalf("%s did not start the parked writer", what)
			}
		}
	}
	if _, ok, parked := o.nextOrPark(start); !ok || !parked {
		t.Fatalf("an empty box: ok %v parked %v, want a parked writer", ok, parked)
	}
	a, b := o.reserve(), o.reserve()
	o.fill(b, &Reply{Xid: 2})
	started(false, "a reply behind an unanswered one")
	o.fill(a, &Reply{Xid: 1})
	started(true, "the first reply")
	o.push(&Event{Path: "/e"})
	started(false, "a second message before the writer parked again")
	msgs, ok, parked := o.nextOrPark(start)
	if !ok || parked || len(msgs) != 3 {
		t.Fatalf("after the start: %d messages, ok %v, parked %v; want 3 (two replies and the event)", len(msgs), ok, parked)
	}
	o.written()
	if _, _, parked := o.nextOrPark(start); !parked {
		t.Fatal("drained: the writer did not park")
	}
	o.close(nil)
	started(true, "close")
	if _, ok, parked := o.nextOrPark(start); ok || parked {
		t.Fatalf("closed and drained: ok %v parked %v, want the end", ok, parked)
	}
}
