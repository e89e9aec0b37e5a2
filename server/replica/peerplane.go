package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"coord/api"
)

// The peer plane: every connection between servers (raft's stream and the
// server-to-server gRPC services: forward, commits, read index, touch,
// join, and the Admin service for members) arrives on one listener of its
// own, the raft port. A connection is a TLS session whose both ends prove
// membership before any protocol byte is read (PeerAuth: a certificate of
// the peer CA, or the cluster key); then the dialer names the channel in
// one byte, 'R' for raft, 'G' for gRPC and 'C' for commit notices
// (notices.go). Nothing of this plane is
// served on a client port, and a connection that fails the handshake is
// closed without reading a byte of raft or gRPC.

// PeerAuth is how members prove themselves to each other. Server must
// require and verify the dialer's certificate; Client must verify the
// listener's. Build it with KeyAuth, or from peer certificates.
type PeerAuth struct {
	Server *tls.Config
	Client *tls.Config
}

// Channel bytes, sent by the dialer after the handshake.
const (
	chanRaft byte = 'R'
	chanGRPC byte = 'G'
)

// peerHandshakeTimeout bounds a new connection's handshake and channel
// byte: a stranger that connects and says nothing is dropped.
const peerHandshakeTimeout = 10 * time.Second

// maxPeerHandshakes bounds handshakes in progress, so a flood of
// connections cannot take the server's memory.
const maxPeerHandshakes = 128

type peerPlane struct {
	lis       net.Listener
	advertise net.Addr
	auth      PeerAuth
	dial      func(ctx context.Context, addr string) (net.Conn, error)
	log       *slog.Logger
	maxMsg    int

	raftL *chanListener
	grpcL *chanListener
	grpc  *grpc.Server
	sem   chan struct{}

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool

	onNotices atomic.Pointer[func(net.Conn)] // takes a 'C' connection (notices.go)

	refusedN   atomic.Uint64 // connections refused at the handshake (Stats.PeerRefused)
	refusedLog atomic.Int64  // unix ns of the last refusal logged
}

func newPeerPlane(cfg *Config, log *slog.Logger) (*peerPlane, error) {
	if cfg.PeerListener == nil || cfg.PeerDial == nil {
		return nil, errors.New("replica: Config needs a PeerListener and PeerDial")
	}
	if cfg.PeerAuth.Server == nil || cfg.PeerAuth.Client == nil {
		return nil, errors.New("replica: Config.PeerAuth is required: peers always authenticate each other")
	}
	addr := cfg.Advertise
	if addr == nil {
		addr = cfg.PeerListener.Addr()
	}
	maxMsg := cfg.MaxMsgBytes
	if maxMsg <= 0 {
		maxMsg = 8 << 20
	}
	p := &peerPlane{lis: cfg.PeerListener, advertise: addr, auth: cfg.PeerAuth, dial: cfg.PeerDial, log: log,
		maxMsg: maxMsg, sem: make(chan struct{}, maxPeerHandshakes)}
	p.raftL = newChanListener(addr)
	p.grpcL = newChanListener(addr)
	p.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg))
	go p.accept()
	return p, nil
}

// accept hands each connection to a handshake of its own.
func (p *peerPlane) accept() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			if p.isClosed() || errors.Is(err, net.ErrClosed) {
				p.raftL.Close()
				p.grpcL.Close()
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		select {
		case p.sem <- struct{}{}:
		default:
			c.Close() // too many handshakes in progress
			continue
		}
		go func() {
			defer func() { <-p.sem }()
			p.handshake(c)
		}()
	}
}

// handshake authenticates c and passes it to raft or gRPC.
func (p *peerPlane) handshake(c net.Conn) {
	c.SetDeadline(time.Now().Add(peerHandshakeTimeout))
	tc := tls.Server(c, p.auth.Server)
	var ch [1]byte
	err := tc.Handshake()
	if err == nil {
		_, err = io.ReadFull(tc, ch[:])
	}
	if err != nil {
		p.refused(c.RemoteAddr(), err)
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	switch ch[0] {
	case chanRaft:
		p.raftL.put(tc)
	case chanGRPC:
		p.grpcL.put(tc)
	case chanNotices:
		if f := p.onNotices.Load(); f != nil {
			(*f)(tc)
		} else {
			tc.Close()
		}
	default:
		p.refused(c.RemoteAddr(), fmt.Errorf("unknown channel %q", ch[0]))
		tc.Close()
	}
}

// refused counts a refused connection and logs it, at most once a second.
func (p *peerPlane) refused(from net.Addr, err error) {
	p.refusedN.Add(1)
	now := time.Now().UnixNano()
	if last := p.refusedLog.Load(); now-last > int64(time.Second) && p.refusedLog.CompareAndSwap(last, now) {
		p.log.Warn("peer connection refused: not a member", "from", from.String(), "err", err)
	}
}

// dialChannel opens an authenticated connection to a server's peer port
// and names the channel.
func (p *peerPlane) dialChannel(ctx context.Context, addr string, ch byte) (net.Conn, error) {
	c, err := p.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	cfg := p.auth.Client.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(c, cfg)
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	} else {
		c.SetDeadline(time.Now().Add(peerHandshakeTimeout))
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("server: peer %s: %w", addr, err)
	}
	if _, err := tc.Write([]byte{ch}); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return tc, nil
}

// DialOptions are the options of a gRPC connection to another server's
// peer plane: authenticated connections, quick to reconnect once a peer is
// back. gRPC's default backoff grows to two minutes, which would keep a
// healed partition or a restarted peer apart that long; here it stops at
// 250 ms (a few refused dials a second to a server that is down), because
// raft may be in contact again at once (the leader retries replication
// every 100 ms, heartbeats.go) and a follower serving again must reach the
// leader for a sync or a touch report within a sync's bound
// (2 × LeaderWait, 800 ms in the tests). gRPC's own way to cut a wait
// short, ResetConnectBackoff, races its balancer (seen by -race in CI).
func (p *peerPlane) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		// TLS is under the gRPC connection, in the dialer.
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return p.dialChannel(ctx, addr, chanGRPC)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.maxMsg), grpc.MaxCallSendMsgSize(p.maxMsg)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
			MinConnectTimeout: 2 * time.Second,
		}),
	}
}

// conn returns the shared gRPC connection to a server's peer address.
func (p *peerPlane) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.dialOptions()...)
	if err != nil {
		return nil, err
	}
	if p.conns == nil {
		p.conns = map[string]*grpc.ClientConn{}
	}
	p.conns[addr] = cc
	return cc, nil
}

func (p *peerPlane) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *peerPlane) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.lis.Close()
	p.raftL.Close()
	p.grpcL.Close()
	p.grpc.Stop()
	for _, cc := range conns {
		cc.Close()
	}
}

// raftStream is raft's stream layer on the peer plane.
type raftStream struct {
	*chanListener
	p *peerPlane
	// running, once set, lets raft's connections through; until then
	// Accept closes them.
	running *atomic.Bool
}

// Accept returns the next raft connection once raft runs, and closes those
// that come before. raft's transport accepts from the moment it is made,
// before NewRaft has restored the snapshot (seconds at millions of znodes)
// and installed its heartbeat fast path: a heartbeat taken then waits for
// raft's main goroutine, which, once it runs, may first spend seconds
// reading the replay for the leader's first AppendEntries. The leader,
// waiting on that heartbeat for up to a transport timeout (10 s), sent no
// other, and the restarted server, hearing from no leader, served nobody
// (a 10M restart waited 6.9 s for it). Closed, the leader's heartbeat fails
// and is sent again within half a heartbeat timeout, and the one after
// raft runs takes the fast path whatever the main goroutine is doing.
func (s raftStream) Accept() (net.Conn, error) {
	for {
		c, err := s.chanListener.Accept()
		if err != nil || s.running.Load() {
			return c, err
		}
		c.Close()
	}
}

func (s raftStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.p.dialChannel(ctx, string(addr), chanRaft)
}

// chanListener is a net.Listener of connections the peer plane accepted
// and authenticated.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) put(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// PeerServices are the server-to-server calls the server that embeds a
// replica answers (the replica answers forward, commits and read index).
type PeerServices interface {
	Touch(context.Context, *api.TouchRequest) (*api.TouchResponse, error)
	Join(context.Context, *api.JoinRequest) (*api.JoinResponse, error)
}

// internalService is the Internal gRPC service on the peer plane.
type internalService struct {
	api.UnimplementedInternalServer
	r *Replica
}

func (i internalService) Forward(stream api.Internal_ForwardServer) error {
	return i.r.ServeForward(stream)
}

func (i internalService) Commits(_ *api.CommitsRequest, stream api.Internal_CommitsServer) error {
	return i.r.ServeCommits(stream)
}

func (i internalService) ReadIndex(context.Context, *api.ReadIndexRequest) (*api.ReadIndexResponse, error) {
	idx, err := i.r.ReadIndex()
	if err != nil {
		return nil, err
	}
	return &api.ReadIndexResponse{Index: idx}, nil
}

func (i internalService) Touch(ctx context.Context, req *api.TouchRequest) (*api.TouchResponse, error) {
	return i.r.cfg.Services.Touch(ctx, req)
}

func (i internalService) Join(ctx context.Context, req *api.JoinRequest) (*api.JoinResponse, error) {
	return i.r.cfg.Services.Join(ctx, req)
}

// PeerConn returns the shared gRPC connection to another server's peer
// plane (its raft address).
func (r *Replica) PeerConn(addr string) (*grpc.ClientConn, error) { return r.peers.conn(addr) }

// PeerDialOptions are the options of a dedicated gRPC connection to
// another server's peer plane.
func (r *Replica) PeerDialOptions() []grpc.DialOption { return r.peers.dialOptions() }

// Leader returns the current leader's id and peer (raft) address, waiting
// up to ctx for one to be known.
func (r *Replica) Leader(ctx context.Context) (id, addr string, err error) {
	for {
		a, lid := r.raft.LeaderWithID()
		if lid != "" && a != "" {
			return string(lid), string(a), nil
		}
		ch := r.Changed()
		select {
		case <-ctx.Done():
			return "", "", ErrNoLeader
		case <-r.closing:
			return "", "", ErrClosed
		case <-ch:
		case <-time.After(10 * time.Millisecond):
		}
	}
}
