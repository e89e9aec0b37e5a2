// Package memnet is an in-memory network of named hosts, for tests that run
// whole coord clusters in one process without TCP between the servers.
//
// A Network holds hosts; a Host is one server's view of it: it listens on
// addresses and dials them. Addresses are plain strings ("s1:7000") in one
// flat namespace shared by every host of the Network: a dial reaches
// whichever host listens on exactly that string. A connection (Conn) has the
// semantics of a TCP connection that tests and the peer plane rely on:
// buffered in both directions, half-close, deadlines, safe for concurrent
// use.
//
// Faults are between hosts: Partition, Isolate and Heal decide which hosts
// reach which. A cut closes the connections across it at once (both ends
// see a connection reset) and refuses dials across it at once (a host
// unreachable error, not a wait for the dial's timeout). Connections within
// one host are never cut, and listeners stay open through every fault.
package memnet

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
)

// BufferSize is how many bytes a connection holds in each direction that
// the reader has not read: a Write returns at once while they fit and
// blocks (until the reader reads, a deadline or a close) when they do not.
const BufferSize = 1 << 20

// backlog is how many dialed connections a listener holds that were not
// accepted yet; a Dial beyond it waits (for an Accept, its ctx or the
// listener's close).
const backlog = 64

// firstPort is the first port given to a Listen on port 0, firstEphemeral
// the first of the local ports of dialed connections.
const (
	firstPort      = 20000
	firstEphemeral = 40000
)

// Network is an in-memory network. Its zero value is not usable; make one
// with New.
type Network struct {
	mu        sync.Mutex
	hosts     map[string]*Host
	listeners map[string]*listener // by address
	links     map[*link]struct{}   // connections between hosts that a fault may cut
	group     map[string]int       // partition group by host name; absent: 0, the rest
	lastGroup int
	nextPort  int
	ephemeral int
}

// New makes an empty network, fully connected.
func New() *Network {
	return &Network{
		hosts:     map[string]*Host{},
		listeners: map[string]*listener{},
		links:     map[*link]struct{}{},
		group:     map[string]int{},
		nextPort:  firstPort,
		ephemeral: firstEphemeral,
	}
}

// Host returns the host of that name, made on first use. A new host is in
// the group of hosts named by no partition (see Partition).
func (n *Network) Host(name string) *Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, ok := n.hosts[name]
	if !ok {
		h = &Host{n: n, name: name}
		n.hosts[name] = h
	}
	return h
}

// Partition splits the network into groups: hosts of one group reach each
// other, no host reaches a host of another group. The hosts named in no
// group (and hosts made later) form one more group together, so
// Partition([]string{"s1"}) cuts s1 off from all the others. A partition
// replaces the one before (and any Isolate); Heal ends it. Naming a host in
// two groups panics. Names need not be hosts yet.
func (n *Network) Partition(groups ...[]string) {
	g := map[string]int{}
	for i, names := range groups {
		for _, name := range names {
			if _, dup := g[name]; dup {
				panic(fmt.Sprintf("memnet: Partition names host %q in more than one group", name))
			}
			g[name] = i + 1
		}
	}
	n.mu.Lock()
	n.group = g
	n.lastGroup = len(groups)
	cut := n.cutLocked()
	n.mu.Unlock()
	resetAll(cut)
}

// Isolate cuts the named host off from every other host; the others keep
// the groups they had (an Isolate on top of a Partition isolates one more
// host). Heal ends it.
func (n *Network) Isolate(name string) {
	n.mu.Lock()
	n.lastGroup++
	n.group[name] = n.lastGroup
	cut := n.cutLocked()
	n.mu.Unlock()
	resetAll(cut)
}

// Heal ends every partition and isolation: all hosts reach each other
// again. Connections that were cut stay closed; dial again.
func (n *Network) Heal() {
	n.mu.Lock()
	n.group = map[string]int{}
	n.lastGroup = 0
	n.mu.Unlock()
}

// reachableLocked reports whether host a may talk to host b.
func (n *Network) reachableLocked(a, b string) bool {
	return a == b || n.group[a] == n.group[b]
}

// cutLocked takes the links the current groups separate out of the
// tracked set and returns them, to reset once n.mu is released.
func (n *Network) cutLocked() []*link {
	var cut []*link
	for l := range n.links {
		if !n.reachableLocked(l.from, l.to) {
			cut = append(cut, l)
			delete(n.links, l)
		}
	}
	return cut
}

func resetAll(links []*link) {
	for _, l := range links {
		l.reset()
	}
}

func (n *Network) untrack(l *link) {
	n.mu.Lock()
	delete(n.links, l)
	n.mu.Unlock()
}

// Host is one host of a Network: what one server sees of it.
type Host struct {
	n    *Network
	name string
}

// Name is the host's name.
func (h *Host) Name() string { return h.name }

// Listen listens on addr, an address no listener of the network holds. An
// empty host part (":7000") stands for this host's name ("s1:7000"); port
// "0" picks a free port, which the listener's Addr reports. Any other string
// is taken as it is. Closing the listener frees the address and resets the
// connections it did not accept yet.
func (h *Host) Listen(addr string) (net.Listener, error) {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if hp, port, err := net.SplitHostPort(addr); err == nil {
		if hp == "" {
			hp = h.name
		}
		if port == "0" {
			for {
				port = strconv.Itoa(n.nextPort)
				n.nextPort++
				if n.listeners[net.JoinHostPort(hp, port)] == nil {
					break
				}
			}
		}
		addr = net.JoinHostPort(hp, port)
	}
	if n.listeners[addr] != nil {
		return nil, &net.OpError{Op: "listen", Net: NetworkName, Addr: Addr{h.name, addr}, Err: syscall.EADDRINUSE}
	}
	l := &listener{n: n, addr: Addr{h.name, addr}, ch: make(chan *Conn, backlog), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// Dial connects to the listener on addr, on any host (as in Listen, an
// empty host part is this host's name). It fails at once
// with a connection refused error (syscall.ECONNREFUSED) if no listener
// holds addr, and with a host unreachable error (syscall.EHOSTUNREACH) if
// a fault separates the two hosts; it waits only while the listener's
// backlog is full, at most until ctx is done. The connection is usable as
// soon as Dial returns, before the listener accepts it.
func (h *Host) Dial(ctx context.Context, addr string) (net.Conn, error) {
	n := h.n
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: NetworkName, Addr: Addr{Address: addr}, Err: err}
	}
	if hp, port, err := net.SplitHostPort(addr); err == nil && hp == "" {
		addr = net.JoinHostPort(h.name, port)
	}
	if err := ctx.Err(); err != nil {
		return nil, opErr(err)
	}
	n.mu.Lock()
	l := n.listeners[addr]
	if l == nil {
		n.mu.Unlock()
		return nil, opErr(syscall.ECONNREFUSED)
	}
	to := l.addr.Host
	if !n.reachableLocked(h.name, to) {
		n.mu.Unlock()
		return nil, opErr(syscall.EHOSTUNREACH)
	}
	local := Addr{h.name, net.JoinHostPort(h.name, strconv.Itoa(n.ephemeral))}
	n.ephemeral++
	lk := newLink(n, h.name, to, local, l.addr)
	if h.name != to {
		// Tracked under the same lock as the check: a fault either sees it
		// or is seen by it.
		n.links[lk] = struct{}{}
	}
	n.mu.Unlock()
	if err := l.enqueue(ctx, lk.b); err != nil {
		lk.reset()
		n.untrack(lk)
		return nil, opErr(err)
	}
	return lk.a, nil
}

// NetworkName is the network name of memnet's addresses (net.Addr.Network).
const NetworkName = "memnet"

// Addr is a memnet address, of a listener or of one end of a connection.
type Addr struct {
	Host    string // the host it belongs to ("" in a dial error)
	Address string // "s1:7000"
}

// Network is "memnet".
func (Addr) Network() string { return NetworkName }

// String is the address.
func (a Addr) String() string { return a.Address }

// listener is a Host's listener.
type listener struct {
	n    *Network
	addr Addr
	// mu: enqueue holds it for reading while it may put a connection in
	// ch, Close for writing once it has closed done, so that no connection
	// enters ch after Close drained it.
	mu     sync.RWMutex
	closed bool
	ch     chan *Conn
	done   chan struct{}
	once   sync.Once
}

func (l *listener) enqueue(ctx context.Context, c *Conn) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return syscall.ECONNREFUSED
	}
	select {
	case l.ch <- c:
		return nil
	case <-l.done:
		return syscall.ECONNREFUSED
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Accept returns the next dialed connection; after Close, an error that
// wraps net.ErrClosed.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: NetworkName, Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close frees the address and resets the connections not accepted yet.
func (l *listener) Close() error {
	first := false
	l.once.Do(func() {
		first = true
		close(l.done)
		l.n.mu.Lock()
		if l.n.listeners[l.addr.Address] == l {
			delete(l.n.listeners, l.addr.Address)
		}
		l.n.mu.Unlock()
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		for {
			select {
			case c := <-l.ch:
				c.link.reset()
				l.n.untrack(c.link)
			default:
				return
			}
		}
	})
	if !first {
		return &net.OpError{Op: "close", Net: NetworkName, Addr: l.addr, Err: net.ErrClosed}
	}
	return nil
}

func (l *listener) Addr() net.Addr { return l.addr }
