package server

import (
	"context"
	"time"

	"google.golang.org/grpc"
)

// leaderConn returns the shared peer-plane connection to the leader,
// waiting up to ctx for a leader to be known.
func (s *Server) leaderConn(ctx context.Context) (*grpc.ClientConn, error) {
	_, addr, err := s.rep.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return s.rep.PeerConn(addr)
}

// leaderWait is how long a request waits for a leader to appear.
func (s *Server) leaderWait() time.Duration { return s.rep.LeaderWait() }
