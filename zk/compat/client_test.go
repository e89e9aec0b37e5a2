package compat

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// wait bounds every wait for something that should happen.
const wait = 10 * time.Second

// client is a go-zookeeper connection with every event it received
// recorded in order (the library's own event channel drops events when
// nobody reads it; the callback sees them all).
type client struct {
	*zk.Conn
	t    testing.TB
	name string
	rec  *recorder
	dial *dialer
}

type clientOpts struct {
	timeout time.Duration // session timeout asked for; 10 s by default
	dialer  *dialer       // nil: dial directly
}

// connect opens a session on addrs and waits until it is established.
func connect(t testing.TB, name string, addrs []string, o clientOpts) *client {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 10 * time.Second
	}
	c := &client{t: t, name: name, rec: newRecorder(), dial: o.dialer}
	opts := optionList(zk.WithLogger(newLogSink(t)), zk.WithLogInfo(false), zk.WithEventCallback(c.rec.add))
	if o.dialer != nil {
		opts = append(opts, zk.WithDialer(o.dialer.dial))
	}
	var err error
	c.Conn, _, err = zk.Connect(addrs, o.timeout, opts...)
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	t.Cleanup(c.Close)
	c.waitState(zk.StateHasSession)
	return c
}

// optionList makes a slice of go-zookeeper's options, whose type is
// unexported.
func optionList[T any](opts ...T) []T { return opts }

// waitState waits for a session event with the given state.
func (c *client) waitState(s zk.State) zk.Event {
	c.t.Helper()
	ev, ok := c.rec.waitFor(func(e zk.Event) bool { return e.Type == zk.EventSession && e.State == s }, wait)
	if !ok {
		c.t.Fatalf("%s: no session event %v within %v (state %v); events: %v", c.name, s, wait, c.State(), c.rec.all())
	}
	return ev
}

// nodeEvents returns the node events (server notifications with a path)
// recorded so far for path.
func (c *client) nodeEvents(path string) []zk.EventType {
	var out []zk.EventType
	for _, e := range c.rec.all() {
		if e.Type != zk.EventSession && e.Type != zk.EventNotWatching && e.Path == path {
			out = append(out, e.Type)
		}
	}
	return out
}

// mark returns the number of events so far, so later checks can look only
// at what came after.
func (c *client) mark() int { return c.rec.len() }

// nodeEventsSince is nodeEvents for the events after mark m.
func (c *client) nodeEventsSince(m int, path string) []zk.EventType {
	var out []zk.EventType
	for _, e := range c.rec.since(m) {
		if e.Type != zk.EventSession && e.Type != zk.EventNotWatching && e.Path == path {
			out = append(out, e.Type)
		}
	}
	return out
}

// barrier makes one round trip on the session. ZooKeeper sends a session
// its notifications in order with its replies, so once barrier returns
// every event for changes applied before it has been recorded.
func (c *client) barrier() {
	c.t.Helper()
	if _, err := c.Sync("/"); err != nil {
		c.t.Fatalf("%s: sync: %v", c.name, err)
	}
	if _, _, err := c.Exists("/"); err != nil {
		c.t.Fatalf("%s: exists: %v", c.name, err)
	}
}

// must fails the test on err.
func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr fails the test unless err is want.
func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v, want %v", what, err, want)
	}
}

func (c *client) create(path, data string, flags int32) string {
	c.t.Helper()
	p, err := c.Create(path, []byte(data), flags, zk.WorldACL(zk.PermAll))
	if err != nil {
		c.t.Fatalf("%s: create %s: %v", c.name, path, err)
	}
	return p
}

func (c *client) stat(path string) *zk.Stat {
	c.t.Helper()
	ok, st, err := c.Exists(path)
	if err != nil || !ok {
		c.t.Fatalf("%s: exists %s: %v %v", c.name, path, ok, err)
	}
	return st
}

// waitEvent waits for one event on a watch channel.
func waitEvent(t testing.TB, what string, ch <-chan zk.Event) zk.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("%s: watch channel closed without an event", what)
		}
		return ev
	case <-time.After(wait):
		t.Fatalf("%s: no watch event within %v", what, wait)
	}
	return zk.Event{}
}

// noEvent checks that a watch channel has nothing (call after a barrier).
func noEvent(t testing.TB, what string, ch <-chan zk.Event) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Errorf("%s: unexpected event %+v", what, ev)
	default:
	}
}

// recorder keeps every event a connection delivered, in order.
type recorder struct {
	mu     sync.Mutex
	events []zk.Event
	wake   chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{})} }

func (r *recorder) add(e zk.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *recorder) all() []zk.Event { return r.since(0) }

func (r *recorder) since(m int) []zk.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]zk.Event(nil), r.events[m:]...)
}

// waitFor returns the first recorded event that matches, waiting up to d.
func (r *recorder) waitFor(match func(zk.Event) bool, d time.Duration) (zk.Event, bool) {
	return r.waitForSince(0, match, d)
}

func (r *recorder) waitForSince(m int, match func(zk.Event) bool, d time.Duration) (zk.Event, bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, e := range r.events[m:] {
			if match(e) {
				r.mu.Unlock()
				return e, true
			}
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-deadline.C:
			return zk.Event{}, false
		}
	}
}

// dialer lets a test decide which servers a client may reach, hold it away
// from all of them, and freeze its connection underneath it (go-zookeeper
// moves to another server when its connection fails).
type dialer struct {
	mu      sync.Mutex
	allowed map[string]bool // nil: all
	hold    chan struct{}   // non-nil: dials wait until it is closed
	conns   []*gateConn
}

func newDialer(allowed ...string) *dialer {
	d := &dialer{}
	d.allow(allowed...)
	return d
}

// allow restricts dialing to addrs (none: every address).
func (d *dialer) allow(addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(addrs) == 0 {
		d.allowed = nil
		return
	}
	d.allowed = map[string]bool{}
	for _, a := range addrs {
		d.allowed[a] = true
	}
}

// holdDials makes new dials wait until release is called.
func (d *dialer) holdDials() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hold == nil {
		d.hold = make(chan struct{})
	}
}

func (d *dialer) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hold != nil {
		close(d.hold)
		d.hold = nil
	}
}

func (d *dialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	hold := d.hold
	d.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-time.After(30 * time.Second):
			return nil, errors.New("dialer: held too long")
		}
	}
	d.mu.Lock()
	ok := d.allowed == nil || d.allowed[addr]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dialer: %s not allowed by the test", addr)
	}
	nc, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	gc := &gateConn{Conn: nc}
	d.mu.Lock()
	d.conns = append(d.conns, gc)
	d.mu.Unlock()
	return gc, nil
}

// freeze makes the current connections go silent both ways without closing
// them, as a stalled client or a partition would: nothing the client writes
// reaches the server (no pings) and nothing the server sends is read.
func (d *dialer) freeze() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.freeze()
	}
}

type gateConn struct {
	net.Conn
	mu     sync.Mutex
	frozen bool
}

func (g *gateConn) freeze() {
	g.mu.Lock()
	g.frozen = true
	g.mu.Unlock()
}

func (g *gateConn) isFrozen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.frozen
}

func (g *gateConn) Write(p []byte) (int, error) {
	if g.isFrozen() {
		return len(p), nil // swallowed
	}
	return g.Conn.Write(p)
}

// Read drops what arrives while frozen, so the client's read deadline (or
// the server closing the connection) is what ends the wait, as on a dead
// link.
func (g *gateConn) Read(p []byte) (int, error) {
	for {
		n, err := g.Conn.Read(p)
		if !g.isFrozen() || err != nil {
			return n, err
		}
	}
}
