package server

import (
	"time"

	"coord/fsm"
	"coord/server/replica"
)

// leaderLoop runs the leader's periodic duties, each decided here with the
// leader's clock and carried out by a command through the log: expire
// sessions, remove empty containers and lapsed TTL nodes, and add known
// servers to the raft configuration. A server that is not leader only waits.
func (s *Server) leaderLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.cfg.Tick/2, 5*time.Millisecond))
	defer tick.Stop()
	// A server that starts with raft state was a member: state comes only
	// from a configuration that held this server. If it is not in the
	// configuration now, an operator removed it (its own removal is the
	// last entry it was sent), and it stays out after a restart as before
	// one, whichever server leads (the removing leader's refusal of its
	// join is that leader's memory).
	wasLeader, wasMember, toldRemoved := false, s.rep.LastIndex() > 0, false
	// A rebuilt server (Config.Rebuild) asks to join saying so until it is
	// answered, even once raft's replication has made it a member again:
	// only the leader's removal and re-adding makes its lost votes not
	// count. The removal it asked for is not an operator's.
	rebuildPending := s.cfg.Rebuild
	var lastContainerCheck, lastReconcile time.Time
	for {
		select {
		case <-s.closing:
			return
		case <-tick.C:
		}
		leader := s.rep.IsLeader()
		if leader && !wasLeader {
			// A new leader gives every session a full timeout: it cannot
			// know when the old leader last heard from them.
			n := s.sess.TakeOver()
			s.log.Info("became leader; session timeouts re-armed", "sessions", n)
		}
		wasLeader = leader
		if !leader && rebuildPending {
			if s.rebuildAsked.Load() {
				rebuildPending, wasMember = false, false
			} else if time.Since(lastReconcile) > s.cfg.RaftTimeout {
				lastReconcile = time.Now()
				go s.join()
			}
			continue
		}
		if !leader {
			// A server asks to join until it is in the configuration; once
			// it has been, leaving it means an operator removed it, and it
			// stays out until one adds it back.
			if s.joinRefused.Swap(false) {
				// Removed before this loop saw it in the configuration.
				wasMember = true
			}
			switch in := s.inConfiguration(); {
			case in:
				wasMember, toldRemoved = true, false
				s.removed.Store(false)
			case wasMember && !toldRemoved:
				toldRemoved = true
				s.removed.Store(true)
				s.log.Warn("this server was removed from the cluster's configuration; it will not rejoin by itself (add it back with the admin API)")
			case !wasMember && time.Since(lastReconcile) > s.cfg.RaftTimeout:
				lastReconcile = time.Now()
				go s.join()
			}
			continue
		}
		now := s.clock.Now()
		s.sess.Expire(now)
		if now.Sub(lastContainerCheck) >= s.cfg.ContainerCheckInterval {
			lastContainerCheck = now
			v := s.rep.View()
			paths := append(v.ContainerCandidates(), v.ExpiredTTLs(now.UnixMilli())...)
			for _, p := range paths {
				cmd := &fsm.Command{Type: fsm.CmdDeleteContainer, Op: fsm.Op{Type: fsm.CmdDeleteContainer, Path: p}}
				s.rep.Submit(cmd, func(r replica.Result) {
					if r.Err == nil && r.Res.Err == nil { // a container that gained a child stays: nothing to record
						s.sess.AuditServerWrite("", cmd, r.Res, nil)
					}
				})
			}
		}
		if time.Since(lastReconcile) > s.cfg.RaftTimeout {
			lastReconcile = time.Now()
			go s.reconcileMembers(nil)
		}
		go s.reconf.Reconcile()
	}
}
