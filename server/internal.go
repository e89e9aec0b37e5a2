package server

import (
	"context"
	"errors"
	"time"

	"coord/api"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// peerServices answers the server-to-server calls the replica leaves to
// the server (on the peer plane: only authenticated members reach them).
type peerServices struct{ s *Server }

// Touch records heartbeats of sessions connected to another server.
func (p peerServices) Touch(ctx context.Context, req *api.TouchRequest) (*api.TouchResponse, error) {
	if d := p.s.touchDelayForTest.Load(); d != nil {
		// A leader that gets to the report only after d, if the
		// follower still waits for it then.
		select {
		case <-time.After(*d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &api.TouchResponse{Unknown: p.s.sess.TouchAll(req.Sessions)}, nil
}

// Join adds the calling server to the cluster (on the leader) or passes the
// request on to the leader.
func (p peerServices) Join(ctx context.Context, req *api.JoinRequest) (*api.JoinResponse, error) {
	s := p.s
	if req.Member == nil || req.Member.Id == "" || req.Member.RaftAddr == "" || req.Member.GrpcAddr == "" {
		return nil, errors.New("server: Join needs the member's id, raft and gRPC addresses")
	}
	joiner := Member{ID: req.Member.Id, RaftAddr: req.Member.RaftAddr, GRPCAddr: req.Member.GrpcAddr, ZKAddr: req.Member.ZkAddr, Observer: req.Member.Role == "observer"}
	if err := s.refuseRemoved(req); err != nil {
		return nil, err
	}
	s.learn(joiner)
	if !s.rep.IsLeader() {
		cc, err := s.leaderConn(ctx)
		if err != nil {
			return nil, err
		}
		return api.NewInternalClient(cc).Join(ctx, req)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // the asking server gave up on this ask
	}
	if req.Rebuild {
		if err := s.removeToRebuild(joiner.ID); err != nil {
			return nil, err
		}
	}
	s.reconcileMembers(&joiner)
	return &api.JoinResponse{Members: s.memberList()}, nil
}

// refuseRemoved refuses, on the leader, a Join from a server an operator
// removed (RemoveServer) while this server led, if the server still holds
// raft state (a log): that is the server removed, and only an operator
// adds it back (AddServer). One started again on an empty data directory
// joins as a new server (docs/deploy.md), and a rebuild is let through.
// A server asks to join until it sees itself in the configuration, which
// one removed a moment after it was added may never do: CI saw a removed
// server added straight back. The refused server takes the answer as its
// removal and stops asking (duties.go).
func (s *Server) refuseRemoved(req *api.JoinRequest) error {
	if req.Rebuild || !s.rep.IsLeader() {
		return nil
	}
	s.mu.Lock()
	at, removed := s.removedAt[req.Member.Id]
	s.mu.Unlock()
	if !removed || req.LastIndex == 0 {
		return nil
	}
	s.log.Info("refused a join from a server an operator removed", "id", req.Member.Id, "removed_at", at, "its_last_index", req.LastIndex)
	return status.Errorf(codes.FailedPrecondition,
		"server: %s was removed from the configuration (index %d) and holds its old state (index %d): an operator adds it back, or it starts again empty", req.Member.Id, at, req.LastIndex)
}

// removeToRebuild (leader) removes a voter that lost its raft state and
// starts again empty (Config.Rebuild): reconcileMembers then adds it back
// as a non-voter and promotes it once it has caught up, so a vote or entry
// it held before the loss never counts.
func (s *Server) removeToRebuild(id string) error {
	if id == s.cfg.ID {
		return errors.New("server: a leader cannot rebuild itself")
	}
	servers, err := s.rep.Configuration()
	if err != nil {
		return err
	}
	for _, srv := range servers {
		if srv.ID == id && srv.Voter {
			s.log.Warn("removing a voter that lost its raft state, to add it back empty", "id", id)
			_, err := s.rep.RemoveServer(id, s.leaderWait())
			return err
		}
	}
	return nil
}
