package server

import (
	"context"

	"github.com/hashicorp/raft"

	"coord/api"
)

// syncIndex returns an index such that once this server has applied it,
// it has applied everything committed before the call (ZooKeeper's sync).
func (s *Server) syncIndex(ctx context.Context) (uint64, error) {
	if s.raft.State() == raft.Leader {
		if err := s.raft.Barrier(s.leaderWait()).Error(); err != nil {
			return 0, err
		}
		return s.fsm.applied.Load(), nil
	}
	m, err := s.leaderMember(ctx)
	if err != nil {
		return 0, err
	}
	cc, err := s.peers.get(m.GRPCAddr)
	if err != nil {
		return 0, err
	}
	resp, err := api.NewInternalClient(cc).ReadIndex(ctx, &api.ReadIndexRequest{})
	if err != nil {
		return 0, err
	}
	return resp.Index, nil
}

// waitApplied blocks until this server has applied index.
func (s *Server) waitApplied(ctx context.Context, index uint64) error {
	for {
		ch := s.fsm.appliedChanged()
		if s.fsm.applied.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return errClosed
		}
	}
}
