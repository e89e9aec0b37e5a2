package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/fsm"
	"coord/server/replica"
)

// adminService serves operators (coordctl) and the leader's catch-up checks.
type adminService struct {
	api.UnimplementedAdminServer
	s *Server
}

func (a *adminService) Status(ctx context.Context, _ *api.StatusRequest) (*api.StatusResponse, error) {
	s := a.s
	v := s.rep.View()
	addr, leaderID := s.raft.LeaderWithID()
	sessions := s.sess.Sessions()
	return &api.StatusResponse{
		Id: s.cfg.ID, Role: s.Role(), LeaderId: string(leaderID), LeaderAddr: string(addr),
		Term: s.raft.CurrentTerm(), CommitIndex: s.raft.CommitIndex(), AppliedIndex: s.rep.Applied(),
		LastZxid: int64(v.LastZxid()), Znodes: int64(v.NodeCount()), Sessions: int64(sessions),
		Watches: int64(s.sess.Watches().Len()), UptimeMs: time.Since(s.started).Milliseconds(), DbBytes: s.dbBytes(),
	}, nil
}

// dbBytes is the size of the raft log store's files (0 with stores handed
// in).
func (s *Server) dbBytes() int64 {
	if s.cfg.Stores != nil {
		return 0
	}
	return replica.LogStoreBytes(s.cfg.DataDir)
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
			GrpcAddr: m.GRPCAddr, ZkAddr: m.ZKAddr, Role: role, Leader: srv.ID == leaderID, Alive: alive})
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

// Sessions lists the session table, marking the sessions connected here.
func (a *adminService) Sessions(ctx context.Context, _ *api.SessionsRequest) (*api.SessionsResponse, error) {
	here := map[int64]bool{}
	for _, c := range a.s.sess.Conns() {
		here[c.ID()] = true
	}
	resp := &api.SessionsResponse{}
	for _, info := range a.s.rep.View().Sessions() {
		resp.Sessions = append(resp.Sessions, &api.SessionInfo{Id: info.ID, TimeoutMs: info.Timeout, Owner: info.Owner,
			Ephemerals: int64(info.Ephemerals), ConnectedHere: here[info.ID]})
	}
	return resp, nil
}

// KillSession closes a session through the log, as its expiry does.
func (a *adminService) KillSession(ctx context.Context, req *api.KillSessionRequest) (*api.KillSessionResponse, error) {
	if _, ok := a.s.rep.View().Session(req.Id); !ok {
		return nil, status.Errorf(codes.NotFound, "no session 0x%x", req.Id)
	}
	res, err := a.s.rep.Propose(ctx, &fsm.Command{Type: fsm.CmdCloseSession, Session: req.Id})
	if err == nil {
		err = res.Res.Err
	}
	if err != nil {
		if fsm.CodeOf(err) == fsm.SessionExpired || fsm.CodeOf(err) == fsm.NoNode {
			return nil, status.Errorf(codes.NotFound, "no session 0x%x", req.Id)
		}
		return nil, status.Errorf(codes.Unavailable, "closing session 0x%x: %v", req.Id, err)
	}
	return &api.KillSessionResponse{}, nil
}

// HashKV waits until this server has applied min_index and answers the
// digest of its state with the index it is at. The view is taken under
// the apply lock (so it and the index agree) and hashed outside it.
func (a *adminService) HashKV(ctx context.Context, req *api.HashKVRequest) (*api.HashKVResponse, error) {
	if err := a.s.rep.WaitApplied(ctx, req.MinIndex); err != nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "waiting to apply index %d: %v", req.MinIndex, err)
	}
	var v *fsm.View
	var applied uint64
	a.s.rep.Read(func(view *fsm.View) { v, applied = view, a.s.rep.Applied() })
	d := v.Digest()
	return &api.HashKVResponse{Id: a.s.cfg.ID, AppliedIndex: applied, LastZxid: int64(v.LastZxid()), Digest: d[:]}, nil
}

// SaveSnapshot streams this server's state in the format of its raft
// snapshots (a uvarint applied index, then the state machine's stream).
func (a *adminService) SaveSnapshot(_ *api.SaveSnapshotRequest, stream api.Admin_SaveSnapshotServer) error {
	var v *fsm.View
	var applied uint64
	a.s.rep.Read(func(view *fsm.View) { v, applied = view, a.s.rep.Applied() })
	w := bufio.NewWriterSize(&chunkWriter{stream: stream}, 1<<20)
	if _, err := w.Write(binary.AppendUvarint(nil, applied)); err != nil {
		return err
	}
	if _, err := v.WriteTo(w); err != nil {
		return err
	}
	return w.Flush()
}

// chunkWriter sends what it is given as snapshot chunks.
type chunkWriter struct{ stream api.Admin_SaveSnapshotServer }

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), 1<<20)]
		if err := c.stream.Send(&api.SnapshotChunk{Data: chunk}); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}
