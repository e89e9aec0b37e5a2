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
	s.reconcileMembers(&joiner)
	return &api.JoinResponse{Members: s.memberList()}, nil
}
