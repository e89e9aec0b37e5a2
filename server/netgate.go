package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// netGate carries all of a server's traffic with the other servers: raft's
// connections (its stream layer) and the server-to-server gRPC calls (the
// dialer of its peer connections, and its Internal service). Closing it
// cuts this server off from the others as a network partition does, while
// its clients still reach it: in-process tests isolate a server with it
// (TestCluster.Isolate), over real TCP, without touching the host's network.
// Open, it costs one atomic load per connection.
type netGate struct {
	peerTLS *tls.Config // TLS to the other servers (nil: plaintext)
	source  net.Addr    // local address of connections to them (nil: any)
	cut     atomic.Bool
	mu      sync.Mutex
	conns   map[*gatedConn]struct{}
}

var errIsolated = errors.New("server: cut off from the other servers (isolated)")

// newNetGate makes an open gate; sourceIP, if not "", is the local IP of
// every connection it opens (Config.PeerSourceIP).
func newNetGate(sourceIP string) *netGate {
	g := &netGate{conns: map[*gatedConn]struct{}{}}
	if ip := net.ParseIP(sourceIP); ip != nil {
		g.source = &net.TCPAddr{IP: ip}
	}
	return g
}

// isolate closes the gate and every connection through it.
func (g *netGate) isolate() {
	g.cut.Store(true)
	g.mu.Lock()
	conns := make([]*gatedConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (g *netGate) heal() { g.cut.Store(false) }

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
	c, err := (&net.Dialer{LocalAddr: g.source}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return g.track(c), nil
}

// peerDialOptions are the options of every gRPC client connection to
// another server: through the gate, and quick to reconnect once a peer is
// back (gRPC's default backoff grows to two minutes, which would keep a
// healed partition or a restarted peer apart that long).
func (g *netGate) peerDialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if g.peerTLS != nil {
		creds = credentials.NewTLS(g.peerTLS)
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(g.dial),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
	}
}

// unaryInterceptor and streamInterceptor refuse the Internal service (only
// servers call it) while the gate is closed; clients' calls pass.
func (g *netGate) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if g.cut.Load() && isInternal(info.FullMethod) {
		return nil, status.Error(codes.Unavailable, errIsolated.Error())
	}
	return h(ctx, req)
}

func (g *netGate) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if g.cut.Load() && isInternal(info.FullMethod) {
		return status.Error(codes.Unavailable, errIsolated.Error())
	}
	return h(srv, ss)
}

func isInternal(method string) bool { return strings.Contains(method, ".Internal/") }

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

// gatedStream is raft's stream layer over TCP, through the gate.
type gatedStream struct {
	net.Listener
	advertise net.Addr
	gate      *netGate
	tls       *tls.Config // the server side of raft's TLS (nil: plaintext)
}

func (s *gatedStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := s.gate.dial(ctx, string(addr))
	if err != nil || s.gate.peerTLS == nil {
		return c, err
	}
	cfg := s.gate.peerTLS.Clone()
	cfg.ServerName, _, _ = net.SplitHostPort(string(addr))
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

func (s *gatedStream) Accept() (net.Conn, error) {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if s.gate.cut.Load() {
			c.Close()
			continue
		}
		c = s.gate.track(c)
		if s.tls != nil {
			c = tls.Server(c, s.tls)
		}
		return c, nil
	}
}

func (s *gatedStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.Listener.Addr()
}
