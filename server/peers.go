package server

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// peerConns keeps one gRPC connection per other server, so server-to-server
// calls (touches, syncs, joins, catch-up checks) do not dial each time.
type peerConns struct {
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
	opts   []grpc.DialOption // netGate.peerDialOptions
}

func (p *peerConns) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, err
	}
	if p.conns == nil {
		p.conns = map[string]*grpc.ClientConn{}
	}
	p.conns[addr] = cc
	return cc, nil
}

func (p *peerConns) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, cc := range p.conns {
		cc.Close()
	}
	p.conns = nil
}

// replicaPeers is how the replica reaches the leader: through the members
// this server knows and its shared connections.
type replicaPeers struct{ s *Server }

func (p replicaPeers) Leader(ctx context.Context) (string, string, error) {
	m, err := p.s.leaderMember(ctx)
	return m.ID, m.GRPCAddr, err
}

func (p replicaPeers) Conn(addr string) (*grpc.ClientConn, error) { return p.s.peers.get(addr) }

func (p replicaPeers) DialOptions() []grpc.DialOption { return p.s.gate.peerDialOptions() }

// leaderWait is how long a request waits for a leader to appear.
func (s *Server) leaderWait() time.Duration { return s.rep.LeaderWait() }
