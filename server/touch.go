package server

import (
	"context"
	"time"

	"coord/api"
)

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
		ids := s.sess.TakeTouched()
		if len(ids) == 0 || s.rep.IsLeader() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Tick)
		cc, err := s.leaderConn(ctx)
		if err == nil {
			_, err = api.NewInternalClient(cc).Touch(ctx, &api.TouchRequest{Sessions: ids, ServerId: s.cfg.ID})
		}
		cancel()
		if err != nil {
			s.log.Debug("reporting session touches", "err", err)
		}
	}
}
