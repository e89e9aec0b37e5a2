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
		start := time.Now()
		n, err := s.sess.ReportTouches(s.sendTouches)
		switch {
		case err != nil:
			s.metrics.touchReports.WithLabelValues("failed").Observe(time.Since(start).Seconds())
		case n > 0:
			s.metrics.touchReports.WithLabelValues("ok").Observe(time.Since(start).Seconds())
		}
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

// touchReportWait bounds one touch report. It is longer than a tick: a
// leader too loaded to answer within a tick (seen with 100,000 sessions on
// an oversubscribed machine: every report timed out at 2 s for minutes, and
// the leader expired whole servers' sessions) still takes the report in
// when it gets to it, and the touches count from then. A report to a
// leader that is gone ends as soon as raft names another leader, or none,
// so the sessions go to the next leader without waiting this long.
const touchReportWait = 10 * time.Second

// sendTouches reports ids to the leader (Internal.Touch).
func (s *Server) sendTouches(ids []int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), touchReportWait)
	defer cancel()
	id, addr, err := s.rep.Leader(ctx)
	if err != nil {
		return err
	}
	cc, err := s.rep.PeerConn(addr)
	if err != nil {
		return err
	}
	ctx, cancelLeads := s.rep.WhileLeads(ctx, id)
	defer cancelLeads()
	_, err = api.NewInternalClient(cc).Touch(ctx, &api.TouchRequest{Sessions: ids, ServerId: s.cfg.ID})
	return err
}
