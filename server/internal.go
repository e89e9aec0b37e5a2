package server

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/metadata"

	"coord/api"
	"coord/fsm"
)

// internalService serves the server-to-server RPCs.
type internalService struct {
	api.UnimplementedInternalServer
	s *Server
}

// Forward applies a follower's writes in the order they arrive and answers
// each once it is committed.
func (i *internalService) Forward(stream api.Internal_ForwardServer) error {
	s := i.s
	origin := ""
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok && len(md.Get("coord-origin")) > 0 {
		origin = md.Get("coord-origin")[0]
	}
	if origin == "" {
		return errors.New("server: Forward needs the coord-origin header")
	}
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		return err
	}
	// pending is a forwarded write's outcome on this leader: done closes
	// once err and index are set.
	type pending struct {
		seq   uint64
		done  chan struct{}
		err   error
		index uint64
	}
	queue := make(chan *pending, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var lastIndex, lastTerm uint64 // a batch's commands share an entry
		for p := range queue {
			<-p.done
			resp := &api.ForwardResponse{Seq: p.seq}
			if p.err != nil {
				resp.Error, resp.Refused = p.err.Error(), errors.Is(p.err, errRefused)
			} else {
				resp.Index = p.index
				if p.index != lastIndex {
					var l raft.Log
					if s.logs.GetLog(p.index, &l) == nil {
						lastIndex, lastTerm = p.index, l.Term
					} else {
						lastIndex, lastTerm = 0, 0
					}
				}
				if p.index == lastIndex {
					resp.Term = lastTerm
				}
			}
			if stream.Send(resp) != nil {
				for range queue { // drain so the reader never blocks
				}
				return
			}
		}
	}()
	defer func() { close(queue); <-done }()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		p := &pending{seq: req.Seq, done: make(chan struct{})}
		cmd, err := fsm.DecodeCommand(req.Command)
		switch {
		case err != nil:
			p.err = err
		case s.raft.State() != raft.Leader:
			p.err = raft.ErrNotLeader
		case s.diskLow.Load() && cmd.Type != fsm.CmdCloseSession:
			p.err = errDiskFull
		}
		if p.err != nil {
			close(p.done)
		} else {
			s.prop.propose(origin, req.Seq, cmd, func(err error, index uint64) {
				p.err, p.index = err, index
				close(p.done)
			})
		}
		queue <- p
	}
}

// Touch records heartbeats of sessions connected to another server.
func (i *internalService) Touch(ctx context.Context, req *api.TouchRequest) (*api.TouchResponse, error) {
	resp := &api.TouchResponse{}
	for _, id := range req.Sessions {
		if !i.s.touchLocal(id) {
			resp.Unknown = append(resp.Unknown, id)
		}
	}
	return resp, nil
}

// ReadIndex answers sync: once a barrier through the log has been applied
// here (so this server still leads and has applied everything committed
// before the call), the applied index is one every follower may wait for.
func (i *internalService) ReadIndex(ctx context.Context, _ *api.ReadIndexRequest) (*api.ReadIndexResponse, error) {
	if i.s.raft.State() != raft.Leader {
		return nil, raft.ErrNotLeader
	}
	if err := i.s.raft.Barrier(i.s.leaderWait()).Error(); err != nil {
		return nil, err
	}
	return &api.ReadIndexResponse{Index: i.s.fsm.applied.Load()}, nil
}

// Join adds the calling server to the cluster (on the leader) or passes the
// request on to the leader.
func (i *internalService) Join(ctx context.Context, req *api.JoinRequest) (*api.JoinResponse, error) {
	s := i.s
	if req.Member == nil || req.Member.Id == "" || req.Member.RaftAddr == "" || req.Member.GrpcAddr == "" {
		return nil, errors.New("server: Join needs the member's id, raft and gRPC addresses")
	}
	joiner := Member{ID: req.Member.Id, RaftAddr: req.Member.RaftAddr, GRPCAddr: req.Member.GrpcAddr, Observer: req.Member.Role == "observer"}
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
