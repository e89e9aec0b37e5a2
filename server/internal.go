package server

import (
	"context"
	"errors"

	"coord/api"
)

// peerServices answers the server-to-server calls the replica leaves to
// the server (on the peer plane: only authenticated members reach them).
type peerServices struct{ s *Server }

// Touch records heartbeats of sessions connected to another server.
func (p peerServices) Touch(ctx context.Context, req *api.TouchRequest) (*api.TouchResponse, error) {
	resp := &api.TouchResponse{}
	for _, id := range req.Sessions {
		if !p.s.sess.Touch(id) {
			resp.Unknown = append(resp.Unknown, id)
		}
	}
	return resp, nil
}

// Join adds the calling server to the cluster (on the leader) or passes the
// request on to the leader.
func (p peerServices) Join(ctx context.Context, req *api.JoinRequest) (*api.JoinResponse, error) {
	s := p.s
	if req.Member == nil || req.Member.Id == "" || req.Member.RaftAddr == "" || req.Member.GrpcAddr == "" {
		return nil, errors.New("server: Join needs the member's id, raft and gRPC addresses")
	}
	joiner := Member{ID: req.Member.Id, RaftAddr: req.Member.RaftAddr, GRPCAddr: req.Member.GrpcAddr, ZKAddr: req.Member.ZkAddr, Observer: req.Member.Role == "observer"}
	s.learn(joiner)
	if !s.rep.IsLeader() {
		cc, err := s.leaderConn(ctx)
		if err != nil {
			return nil, err
		}
		return api.NewInternalClient(cc).Join(ctx, req)
	}
	if req.Rebuild {
		if err := s.removeToRebuild(joiner.ID); err != nil {
			return nil, err
		}
	}
	s.reconcileMembers(&joiner)
	return &api.JoinResponse{Members: s.memberList()}, nil
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
			return s.rep.RemoveServer(id, s.leaderWait())
		}
	}
	return nil
}
