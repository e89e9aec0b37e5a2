package server

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"coord/api"
)

// adminService serves operators (coordctl) and the leader's catch-up checks.
type adminService struct {
	api.UnimplementedAdminServer
	s *Server
}

func (a *adminService) Status(ctx context.Context, _ *api.StatusRequest) (*api.StatusResponse, error) {
	s := a.s
	v := s.fsm.fsm.View()
	addr, leaderID := s.raft.LeaderWithID()
	s.mu.Lock()
	sessions := s.tracker.Len()
	s.mu.Unlock()
	return &api.StatusResponse{
		Id: s.cfg.ID, Role: s.Role(), LeaderId: string(leaderID), LeaderAddr: string(addr),
		Term: s.raft.CurrentTerm(), CommitIndex: s.raft.CommitIndex(), AppliedIndex: s.fsm.applied.Load(),
		LastZxid: int64(v.LastZxid()), Znodes: int64(v.NodeCount()), Sessions: int64(sessions),
		Watches: int64(s.watches.Len()),
	}, nil
}

func (a *adminService) Members(ctx context.Context, _ *api.MembersRequest) (*api.MembersResponse, error) {
	s := a.s
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	_, leaderID := s.raft.LeaderWithID()
	known := map[string]Member{}
	s.mu.Lock()
	for id, m := range s.members {
		known[id] = m
	}
	s.mu.Unlock()
	resp := &api.MembersResponse{}
	for _, srv := range f.Configuration().Servers {
		m := known[string(srv.ID)]
		role := "voter"
		if srv.Suffrage != raft.Voter {
			role = "observer"
		}
		// Without gossip, what raft lists is taken as alive; with it, gossip
		// says (this server is alive by definition).
		alive := true
		if s.gossip != nil && srv.ID != raft.ServerID(s.cfg.ID) {
			alive, _ = s.gossip.isAlive(string(srv.ID))
		}
		resp.Members = append(resp.Members, &api.Member{Id: string(srv.ID), RaftAddr: string(srv.Address),
			GrpcAddr: m.GRPCAddr, Role: role, Leader: srv.ID == leaderID, Alive: alive})
	}
	return resp, nil
}

// errNotLeader tells an operator to ask the leader.
var errNotLeader = errors.New("server: not the leader; ask the leader")

func (a *adminService) AddServer(ctx context.Context, req *api.AddServerRequest) (*api.AddServerResponse, error) {
	s := a.s
	if s.raft.State() != raft.Leader {
		return nil, errNotLeader
	}
	if req.Id == "" || req.RaftAddr == "" {
		return nil, errors.New("server: AddServer needs an id and a raft address")
	}
	var f raft.IndexFuture
	if req.Observer {
		f = s.raft.AddNonvoter(raft.ServerID(req.Id), raft.ServerAddress(req.RaftAddr), 0, s.leaderWait())
	} else {
		f = s.raft.AddVoter(raft.ServerID(req.Id), raft.ServerAddress(req.RaftAddr), 0, s.leaderWait())
	}
	if err := f.Error(); err != nil {
		return nil, err
	}
	return &api.AddServerResponse{}, nil
}

func (a *adminService) RemoveServer(ctx context.Context, req *api.RemoveServerRequest) (*api.RemoveServerResponse, error) {
	s := a.s
	if s.raft.State() != raft.Leader {
		return nil, errNotLeader
	}
	if err := s.raft.RemoveServer(raft.ServerID(req.Id), 0, s.leaderWait()).Error(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.members, req.Id)
	s.mu.Unlock()
	return &api.RemoveServerResponse{}, nil
}

func (a *adminService) TransferLeadership(ctx context.Context, req *api.TransferLeadershipRequest) (*api.TransferLeadershipResponse, error) {
	s := a.s
	if s.raft.State() != raft.Leader {
		return nil, errNotLeader
	}
	var f raft.Future
	if req.Id == "" {
		f = s.raft.LeadershipTransfer()
	} else {
		var addr raft.ServerAddress
		cf := s.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return nil, err
		}
		for _, srv := range cf.Configuration().Servers {
			if string(srv.ID) == req.Id {
				addr = srv.Address
			}
		}
		if addr == "" {
			return nil, errors.New("server: no such server in the configuration")
		}
		f = s.raft.LeadershipTransferToServer(raft.ServerID(req.Id), addr)
	}
	if err := f.Error(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.leaderWait())
	for time.Now().Before(deadline) {
		if _, id := s.raft.LeaderWithID(); id != "" && string(id) != s.cfg.ID {
			return &api.TransferLeadershipResponse{LeaderId: string(id)}, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, id := s.raft.LeaderWithID()
	return &api.TransferLeadershipResponse{LeaderId: string(id)}, nil
}

func (a *adminService) Snapshot(ctx context.Context, _ *api.SnapshotRequest) (*api.SnapshotResponse, error) {
	f := a.s.raft.Snapshot()
	if err := f.Error(); err != nil {
		return nil, err
	}
	meta, rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	rc.Close()
	return &api.SnapshotResponse{Index: meta.Index}, nil
}
