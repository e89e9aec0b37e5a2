package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// netGate carries all of a server's traffic with the other servers: the
// peer plane's listener and every connection it dials (raft's and the
// server-to-server gRPC calls). Closing it (cut
// set, its connections closed) cuts this server off from the others as a
// network partition does, while its clients still reach it: this package's
// tests isolate a server so (TestCluster.Isolate; netGate.isolate and heal
// live in netgate_isolate_test.go), over real TCP, without touching the
// host's network. Open, it costs one atomic load per connection.
type netGate struct {
	source net.Addr    // local address of connections to them (nil: any)
	net    PeerNetwork // nil: TCP
	cut    atomic.Bool
	mu     sync.Mutex
	conns  map[*gatedConn]struct{}
}

var errIsolated = errors.New("server: cut off from the other servers (isolated)")

// newNetGate makes an open gate; sourceIP, if not "", is the local IP of
// every connection it opens (Config.PeerSourceIP); network, if not nil,
// carries them instead of TCP (Config.PeerNetwork).
func newNetGate(sourceIP string, network PeerNetwork) *netGate {
	g := &netGate{conns: map[*gatedConn]struct{}{}, net: network}
	if ip := net.ParseIP(sourceIP); ip != nil {
		g.source = &net.TCPAddr{IP: ip}
	}
	return g
}

func (g *netGate) track(c net.Conn) net.Conn {
	gc := &gatedConn{Conn: c, g: g}
	g.mu.Lock()
	g.conns[gc] = struct{}{}
	g.mu.Unlock()
	if g.cut.Load() { // isolated meanwhile
		gc.Close()
	}
	return gc
}

// dial opens a connection to another server.
func (g *netGate) dial(ctx context.Context, addr string) (net.Conn, error) {
	if g.cut.Load() {
		return nil, errIsolated
	}
	var c net.Conn
	var err error
	if g.net != nil {
		c, err = g.net.Dial(ctx, addr)
	} else {
		c, err = (&net.Dialer{LocalAddr: g.source}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	return g.track(c), nil
}

type gatedConn struct {
	net.Conn
	g    *netGate
	once sync.Once
}

func (c *gatedConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		delete(c.g.conns, c)
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}

// listen opens the peer plane's listener on addr.
func (g *netGate) listen(addr string) (net.Listener, error) {
	if g.net != nil {
		return g.net.Listen(addr)
	}
	return net.Listen("tcp", addr)
}

// gatedListener is the peer plane's listener through the gate: while the
// gate is closed it drops every connection it accepts.
type gatedListener struct {
	net.Listener
	gate *netGate
}

func (l *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.gate.cut.Load() {
			c.Close()
			continue
		}
		return l.gate.track(c), nil
	}
}
