package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"coord/api"
	"coord/fsm"
)

// errDiskFull: the data directory is below Config.MinFreeDisk.
var errDiskFull = errors.New("server: disk nearly full, refusing writes")

// errSelfLeader: raft names this server as leader (it may still be taking
// over).
var errSelfLeader = errors.New("server: this server is the leader")

// errNoLeader: the cluster has no leader this server can reach.
var errNoLeader = errors.New("server: no leader")

// submit sends cmd to the log on behalf of this server without waiting;
// done runs once with the outcome: inside apply when this server applies the
// entry, or from elsewhere when it is known never to (done may then run
// before submit returns). Calls made one after another keep their order in
// the log, which is what keeps a session's writes in order.
func (s *Server) submit(cmd *fsm.Command, done func(applyResult)) {
	seq := s.seq.Add(1)
	s.fsm.expect(seq, cmd, done)
	fail := func(err error) { s.fsm.complete(seq, applyResult{err: err}) }
	select {
	case <-s.closing:
		fail(errClosed)
		return
	default:
	}
	if s.diskLow.Load() && cmd.Type != fsm.CmdCloseSession {
		fail(errDiskFull)
		return
	}
	if s.raft.State() == raft.Leader {
		s.proposeOwn(seq, cmd, fail)
		return
	}
	s.fwd.send(seq, cmd, fail)
}

// proposeOwn hands this leader's own command to the proposer; its outcome
// arrives through apply, so only a failure is reported here.
func (s *Server) proposeOwn(seq uint64, cmd *fsm.Command, fail func(error)) {
	s.prop.propose(s.origin, seq, cmd, func(err error, _ uint64) {
		if err != nil {
			fail(err)
		}
	})
}

// propose is submit and wait.
func (s *Server) propose(ctx context.Context, cmd *fsm.Command) (applyResult, error) {
	ch := make(chan applyResult, 1)
	s.submit(cmd, func(ar applyResult) { ch <- ar })
	select {
	case ar := <-ch:
		return ar, ar.err
	case <-ctx.Done():
		return applyResult{}, ctx.Err()
	}
}

// leaderMember returns the current leader's addresses, waiting for a
// leader to be known.
func (s *Server) leaderMember(ctx context.Context) (Member, error) {
	var lastDiscover time.Time
	for {
		_, id := s.raft.LeaderWithID()
		if id != "" {
			s.mu.Lock()
			m, ok := s.members[string(id)]
			s.mu.Unlock()
			if ok && m.GRPCAddr != "" {
				return m, nil
			}
			// A leader this server has not heard of (it joined later and
			// gossip is off or slow): ask the servers it knows.
			if time.Since(lastDiscover) > 100*time.Millisecond {
				lastDiscover = time.Now()
				s.discover(ctx)
				continue
			}
		}
		select {
		case <-ctx.Done():
			return Member{}, errNoLeader
		case <-s.closing:
			return Member{}, errClosed
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// leaderWait is how long a request waits for a leader to appear.
func (s *Server) leaderWait() time.Duration { return 4 * s.cfg.RaftTimeout }

// forwarder carries this server's writes to the leader over one ordered
// Forward stream, and fails them if the stream breaks.
type forwarder struct {
	s        *Server
	mu       sync.Mutex
	leader   string
	cc       *grpc.ClientConn
	stream   api.Internal_ForwardClient
	cancel   context.CancelFunc
	inflight map[uint64]func(error)
	closed   bool
}

func newForwarder(s *Server) *forwarder {
	return &forwarder{s: s, inflight: map[uint64]func(error){}}
}

func (f *forwarder) send(seq uint64, cmd *fsm.Command, fail func(error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		fail(errClosed)
		return
	}
	if err := f.connectLocked(); err != nil {
		if errors.Is(err, errSelfLeader) {
			// This server took over while the write waited: append it here.
			f.s.proposeOwn(seq, cmd, fail)
			return
		}
		fail(err)
		return
	}
	f.inflight[seq] = fail
	if err := f.stream.Send(&api.ForwardRequest{Seq: seq, Command: cmd.Encode(nil)}); err != nil {
		f.resetLocked(fmt.Errorf("server: forwarding to %s: %w", f.leader, err))
	}
}

// connectLocked makes sure there is a stream to the current leader. While
// there is none (an election is on, or the leader raft still names is
// gone), it keeps trying for leaderWait: nothing has been sent yet, so
// waiting is safe and spares the client a needless connection loss.
func (f *forwarder) connectLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), f.s.leaderWait())
	defer cancel()
	var lastErr error
	for {
		err := f.tryConnectLocked(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, errSelfLeader) && f.s.raft.State() == raft.Leader {
			f.resetLocked(errors.New("server: this server leads now"))
			return err
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return lastErr
		case <-f.s.closing:
			return errClosed
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *forwarder) tryConnectLocked(ctx context.Context) error {
	m, err := f.s.leaderMember(ctx)
	if err != nil {
		return err
	}
	if m.ID == f.s.cfg.ID {
		return errSelfLeader
	}
	if f.stream != nil && f.leader == m.ID {
		return nil
	}
	f.resetLocked(errors.New("server: leader changed"))
	cc, err := grpc.NewClient(m.GRPCAddr, f.s.gate.peerDialOptions()...)
	if err != nil {
		return err
	}
	sctx, scancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "coord-origin", f.s.origin))
	stream, err := api.NewInternalClient(cc).Forward(sctx)
	if err == nil {
		// Make sure the leader answers before sending on the stream: a
		// stream to a dead server fails only at the first Send otherwise.
		_, err = stream.Header()
	}
	if err != nil {
		scancel()
		cc.Close()
		return err
	}
	f.leader, f.cc, f.stream, f.cancel = m.ID, cc, stream, scancel
	go f.receive(stream)
	return nil
}

func (f *forwarder) receive(stream api.Internal_ForwardClient) {
	for {
		resp, err := stream.Recv()
		f.mu.Lock()
		if err != nil {
			if f.stream == stream {
				f.resetLocked(fmt.Errorf("server: forward stream to %s: %w", f.leader, err))
			}
			f.mu.Unlock()
			return
		}
		fail := f.inflight[resp.Seq]
		delete(f.inflight, resp.Seq)
		f.mu.Unlock()
		if resp.Error != "" && fail != nil {
			fail(errors.New(resp.Error))
		}
		if resp.Error == "" && resp.Term != 0 {
			// The write committed: apply it now if this log holds it,
			// rather than when raft next hears from the leader.
			f.s.fsm.learnCommit(position{index: resp.Index, term: resp.Term})
		}
	}
}

// resetLocked drops the stream and fails what was sent on it but not
// answered: whether those entries commit is unknown, as after a ZooKeeper
// connection loss.
func (f *forwarder) resetLocked(err error) {
	if f.cancel != nil {
		f.cancel()
		f.cc.Close()
	}
	f.stream, f.cc, f.cancel, f.leader = nil, nil, nil, ""
	for seq, fail := range f.inflight {
		fail(err)
		delete(f.inflight, seq)
	}
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.resetLocked(errClosed)
}

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
				resp.Error = p.err.Error()
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
	s.learn(Member{ID: req.Member.Id, RaftAddr: req.Member.RaftAddr, GRPCAddr: req.Member.GrpcAddr, Observer: req.Member.Role == "observer"})
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
	s.reconcileMembers()
	return &api.JoinResponse{Members: s.memberList()}, nil
}

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

// discover learns the addresses of the cluster's servers from the servers
// this one knows.
func (s *Server) discover(ctx context.Context) {
	s.mu.Lock()
	var addrs []string
	for _, m := range s.members {
		if m.ID != s.cfg.ID && m.GRPCAddr != "" {
			addrs = append(addrs, m.GRPCAddr)
		}
	}
	s.mu.Unlock()
	for _, addr := range addrs {
		cc, err := s.peers.get(addr)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.RaftTimeout)
		resp, err := api.NewAdminClient(cc).Members(cctx, &api.MembersRequest{})
		cancel()
		if err != nil {
			continue
		}
		s.mu.Lock()
		for _, m := range resp.Members {
			if m.GrpcAddr == "" || m.Id == s.cfg.ID {
				continue
			}
			// Members reports raft suffrage, not the configured role (a
			// voter still catching up is a non-voter): keep what is known.
			known, ok := s.members[m.Id]
			if !ok {
				known = Member{ID: m.Id, Observer: m.Role == "observer"}
			}
			known.RaftAddr, known.GRPCAddr = m.RaftAddr, m.GrpcAddr
			s.members[m.Id] = known
		}
		s.mu.Unlock()
		s.saveMembers()
	}
}
