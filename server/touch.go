package server

import (
	"context"
	"time"

	"coord/api"
)

// touchLoop reports the sessions heard from here to the leader, three
// times a tick, in one call; a report that fails goes with the next one
// (sessions.Layer.ReportTouches).
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
		err := s.sess.ReportTouches(func(ids []int64) error {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Tick)
			defer cancel()
			cc, err := s.leaderConn(ctx)
			if err == nil {
				_, err = api.NewInternalClient(cc).Touch(ctx, &api.TouchRequest{Sessions: ids, ServerId: s.cfg.ID})
			}
			return err
		})
		if err != nil {
			s.log.Debug("reporting session touches; they go with the next report", "err", err)
		}
	}
}
