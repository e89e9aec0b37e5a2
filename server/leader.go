package server

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"coord/api"
	"coord/fsm"
)

// leaderLoop runs the leader's periodic duties, each decided here with the
// leader's clock and carried out by a command through the log: expire
// sessions, remove empty containers and lapsed TTL nodes, and add known
// servers to the raft configuration. A server that is not leader only waits.
func (s *Server) leaderLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.cfg.Tick/2, 5*time.Millisecond))
	defer tick.Stop()
	wasLeader := false
	var lastContainerCheck, lastReconcile time.Time
	for {
		select {
		case <-s.closing:
			return
		case <-tick.C:
		}
		leader := s.raft.State() == raft.Leader
		if leader && !wasLeader {
			// A new leader gives every session a full timeout: it cannot
			// know when the old leader last heard from them.
			s.tracker.ResetAll(s.clock.Now())
			s.log.Info("became leader; session timeouts re-armed", "sessions", s.tracker.Len())
		}
		wasLeader = leader
		if !leader {
			if !s.inConfiguration() && time.Since(lastReconcile) > s.cfg.RaftTimeout {
				lastReconcile = time.Now()
				go s.join()
			}
			continue
		}
		now := s.clock.Now()
		for _, id := range s.tracker.Expired(now) {
			s.log.Info("session expired", "session", sessionHex(id))
			s.submit(&fsm.Command{Type: fsm.CmdCloseSession, Session: id}, func(applyResult) {})
		}
		if now.Sub(lastContainerCheck) >= s.cfg.ContainerCheckInterval {
			lastContainerCheck = now
			v := s.fsm.fsm.View()
			paths := append(v.ContainerCandidates(), v.ExpiredTTLs(now.UnixMilli())...)
			for _, p := range paths {
				s.submit(&fsm.Command{Type: fsm.CmdDeleteContainer, Op: fsm.Op{Type: fsm.CmdDeleteContainer, Path: p}}, func(applyResult) {})
			}
		}
		if time.Since(lastReconcile) > s.cfg.RaftTimeout {
			lastReconcile = time.Now()
			go s.reconcileMembers()
		}
	}
}

// touchLocal records that a session was heard from. On the leader it
// extends the session's deadline at once; elsewhere it is reported to the
// leader with the next batch. It reports whether the session is known.
func (s *Server) touchLocal(id int64) bool {
	s.mu.Lock()
	timeout, ok := s.timeouts[id]
	if ok && s.raft.State() != raft.Leader {
		s.touched[id] = struct{}{}
	}
	s.mu.Unlock()
	if ok {
		s.tracker.Touch(id, timeout)
	}
	return ok
}

// touchLoop reports the sessions heard from here to the leader, twice a
// tick, in one call.
func (s *Server) touchLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.cfg.Tick/3, 5*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		ids := make([]int64, 0, len(s.touched))
		for id := range s.touched {
			ids = append(ids, id)
		}
		clear(s.touched)
		s.mu.Unlock()
		if len(ids) == 0 || s.raft.State() == raft.Leader {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Tick)
		m, err := s.leaderMember(ctx)
		var cc *grpc.ClientConn
		if err == nil {
			cc, err = s.peers.get(m.GRPCAddr)
		}
		if err == nil {
			_, err = api.NewInternalClient(cc).Touch(ctx, &api.TouchRequest{Sessions: ids, ServerId: s.cfg.ID})
		}
		cancel()
		if err != nil {
			s.log.Debug("reporting session touches", "err", err)
		}
	}
}

// learn records a server's addresses.
func (s *Server) learn(m Member) {
	if m.ID == s.cfg.ID {
		return
	}
	s.mu.Lock()
	s.members[m.ID] = m
	s.mu.Unlock()
	s.saveMembers()
}

func (s *Server) memberList() []*api.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*api.Member, 0, len(s.members))
	for _, m := range s.members {
		role := "voter"
		if m.Observer {
			role = "observer"
		}
		out = append(out, &api.Member{Id: m.ID, RaftAddr: m.RaftAddr, GrpcAddr: m.GRPCAddr, Role: role})
	}
	slices.SortFunc(out, func(a, b *api.Member) int {
		if a.Id < b.Id {
			return -1
		}
		if a.Id > b.Id {
			return 1
		}
		return 0
	})
	return out
}

// inConfiguration reports whether raft's configuration lists this server.
func (s *Server) inConfiguration() bool {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == raft.ServerID(s.cfg.ID) {
			return true
		}
	}
	return false
}

// join asks the known servers to add this one to the cluster.
func (s *Server) join() {
	s.mu.Lock()
	var targets []Member
	for _, m := range s.members {
		if m.ID != s.cfg.ID && m.GRPCAddr != "" {
			targets = append(targets, m)
		}
	}
	self := s.members[s.cfg.ID]
	s.mu.Unlock()
	for _, addr := range s.cfg.Join {
		targets = append(targets, Member{ID: addr, GRPCAddr: addr})
	}
	role := "voter"
	if s.cfg.Observer {
		role = "observer"
	}
	req := &api.JoinRequest{Member: &api.Member{Id: s.cfg.ID, RaftAddr: s.RaftAddr(), GrpcAddr: self.GRPCAddr, Role: role}}
	for _, m := range targets {
		cc, err := s.peers.get(m.GRPCAddr)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.RaftTimeout)
		resp, err := api.NewInternalClient(cc).Join(ctx, req)
		cancel()
		if err != nil {
			s.log.Debug("join", "via", m.ID, "err", err)
			continue
		}
		for _, am := range resp.Members {
			s.learn(Member{ID: am.Id, RaftAddr: am.RaftAddr, GRPCAddr: am.GrpcAddr, Observer: am.Role == "observer"})
		}
		return
	}
}

// reconcileMembers (leader only) adds known servers missing from the raft
// configuration as non-voters, and promotes a non-voter whose configured
// role is voter once it has caught up with the log.
func (s *Server) reconcileMembers() {
	if s.raft.State() != raft.Leader {
		return
	}
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	inConfig := map[string]raft.ServerSuffrage{}
	for _, srv := range f.Configuration().Servers {
		inConfig[string(srv.ID)] = srv.Suffrage
	}
	s.mu.Lock()
	members := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		members = append(members, m)
	}
	s.mu.Unlock()
	for _, m := range members {
		suffrage, ok := inConfig[m.ID]
		switch {
		case !ok:
			s.log.Info("adding server as non-voter", "id", m.ID, "raft", m.RaftAddr)
			if err := s.raft.AddNonvoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, s.leaderWait()).Error(); err != nil {
				s.log.Warn("adding server", "id", m.ID, "err", err)
			}
		case suffrage == raft.Nonvoter && !m.Observer && s.caughtUp(m):
			s.log.Info("promoting caught-up server to voter", "id", m.ID)
			if err := s.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, s.leaderWait()).Error(); err != nil {
				s.log.Warn("promoting server", "id", m.ID, "err", err)
			}
		}
	}
}

// caughtUp asks a server how far it has applied the log.
func (s *Server) caughtUp(m Member) bool {
	cc, err := s.peers.get(m.GRPCAddr)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RaftTimeout)
	defer cancel()
	st, err := api.NewAdminClient(cc).Status(ctx, &api.StatusRequest{})
	if err != nil {
		return false
	}
	return st.AppliedIndex+uint64(s.cfg.SnapshotThreshold/10)+64 >= s.raft.CommitIndex()
}
