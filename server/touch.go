package server

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"coord/api"
)

// touchLocal records that a session was heard from. On the leader it
// extends the session's deadline at once; elsewhere it is reported to the
// leader with the next batch. It reports whether the session is known.
func (s *Server) touchLocal(id int64) bool {
	// The tracker follows the log on every server, so it knows every
	// session and its timeout (one copy, from the session table).
	ok := s.tracker.TouchStored(id)
	if ok && s.raft.State() != raft.Leader {
		s.mu.Lock()
		s.touched[id] = struct{}{}
		s.mu.Unlock()
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
