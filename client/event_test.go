package client

import (
	"testing"

	"coord/vocab"
)

// The session channel never blocks: an absent reader loses the oldest
// events, and the last one is always there.
func TestSessionEventsDropOldest(t *testing.T) {
	e := newSessionEvents()
	for i := range 100 {
		e.push(Event{Type: EventSession, Zxid: int64(i)})
	}
	e.push(Event{Type: EventSession, State: StateExpired})
	e.close()
	e.push(Event{State: StateConnected}) // after close: dropped, no panic
	var got []Event
	for ev := range e.ch {
		got = append(got, ev)
	}
	if len(got) != sessionEventsCap || got[len(got)-1].State != StateExpired {
		t.Fatalf("got %d events, last %v", len(got), got[len(got)-1])
	}
	for i := 1; i < len(got)-1; i++ {
		if got[i].Zxid != got[i-1].Zxid+1 {
			t.Fatalf("events out of order: %d after %d", got[i].Zxid, got[i-1].Zxid)
		}
	}
}

// A persistent watch's queue holds any number of events in order and closes
// once they are read.
func TestQueueIsUnboundedAndOrdered(t *testing.T) {
	q := newQueue()
	for i := range 1000 {
		q.push(Event{Type: vocab.EventNodeDataChanged, Zxid: int64(i)})
	}
	q.close()
	n := 0
	for ev := range q.out {
		if ev.Zxid != int64(n) {
			t.Fatalf("event %d has zxid %d", n, ev.Zxid)
		}
		n++
	}
	if n != 1000 {
		t.Fatalf("read %d events", n)
	}
}
