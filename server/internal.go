package server

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"

	"coord/api"
)

// internalService serves the server-to-server RPCs.
type internalService struct {
	api.UnimplementedInternalServer
	s *Server
}

// Forward serves a follower's forward stream (the replica's).
func (i *internalService) Forward(stream api.Internal_ForwardServer) error {
	return i.s.rep.ServeForward(stream)
}

// Commits streams this leader's commit position (the replica's).
func (i *internalService) Commits(_ *api.CommitsRequest, stream api.Internal_CommitsServer) error {
	return i.s.rep.ServeCommits(stream)
}

// Touch records heartbeats of sessions connected to another server.
func (i *internalService) Touch(ctx context.Context, req *api.TouchRequest) (*api.TouchResponse, error) {
	resp := &api.TouchResponse{}
	for _, id := range req.Sessions {
		if !i.s.sess.Touch(id) {
			resp.Unknown = append(resp.Unknown, id)
		}
	}
	return resp, nil
}

// ReadIndex answers sync (the replica's).
func (i *internalService) ReadIndex(context.Context, *api.ReadIndexRequest) (*api.ReadIndexResponse, error) {
	idx, err := i.s.rep.ReadIndex()
	if err != nil {
		return nil, err
	}
	return &api.ReadIndexResponse{Index: idx}, nil
}

// Join adds the calling server to the cluster (on the leader) or passes the
// request on to the leader.
func (i *internalService) Join(ctx context.Context, req *api.JoinRequest) (*api.JoinResponse, error) {
	s := i.s
	if req.Member == nil || req.Member.Id == "" || req.Member.RaftAddr == "" || req.Member.GrpcAddr == "" {
		return nil, errors.New("server: Join needs the member's id, raft and gRPC addresses")
	}
	joiner := Member{ID: req.Member.Id, RaftAddr: req.Member.RaftAddr, GRPCAddr: req.Member.GrpcAddr, ZKAddr: req.Member.ZkAddr, Observer: req.Member.Role == "observer"}
	s.learn(joiner)
	if s.raft.State() != raft.Leader {
		m, err := s.leaderMember(ctx)
		if err != nil {
			return nil, err
		}
		cc, err := s.peers.get(m.GRPCAddr)
		if err != nil {
			return nil, err
		}
		return api.NewInternalClient(cc).Join(ctx, req)
	}
	s.reconcileMembers(&joiner)
	return &api.JoinResponse{Members: s.memberList()}, nil
}
