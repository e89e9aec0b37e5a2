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
	var (
		failingSince time.Time // the first of the reports failing in a row
		warned       bool
	)
	for {
		select {
		case <-s.closing:
			return
		case <-tick.C:
		}
		n, err := s.sess.ReportTouches(func(ids []int64) error {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Tick)
			defer cancel()
			cc, err := s.leaderConn(ctx)
			if err == nil {
				_, err = api.NewInternalClient(cc).Touch(ctx, &api.TouchRequest{Sessions: ids, ServerId: s.cfg.ID})
			}
			return err
		})
		switch {
		case err != nil:
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			s.log.Debug("reporting session touches; they go with the next report", "err", err)
			// A leader that hears of no touch from here for a session
			// timeout expires this server's sessions: say so well before.
			if d := time.Since(failingSince); !warned && d >= s.cfg.MinSessionTimeout {
				warned = true
				s.log.Warn("session touches have not reached the leader; its sessions here expire if this goes on", "for", d.Round(time.Millisecond), "err", err)
			}
		case n > 0 && warned:
			s.log.Info("session touches reach the leader again", "after", time.Since(failingSince).Round(time.Millisecond))
			fallthrough
		case n > 0 || s.rep.IsLeader():
			failingSince, warned = time.Time{}, false
		}
	}
}
