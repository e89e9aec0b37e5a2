package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// A server cut off from the quorum must drop its clients before the
// majority can expire their sessions: otherwise a client keeps being
// answered (pings included) and believes it still holds, say, a lock whose
// ephemeral node the majority has already deleted for another client to
// take.
//
// Each server knows when it last heard from a leader: a follower or
// observer from raft's last contact (every AppendEntries and heartbeat; the
// leader sends one every RaftTimeout/10), a leader always (raft's leader
// lease makes a leader that cannot reach a quorum step down within
// RaftTimeout, and raft counts the step-down as contact). Once that
// contact is older than LeaderLossFraction × a session's negotiated
// timeout, the server closes the session's connection (ZooKeeper clients
// then move to another server and re-attach, keeping their session if it
// is alive), and it refuses new connections while its contact is older
// than that bound for the shortest timeout (it is "not serving", as srvr
// says). An ordinary election (a few hundred milliseconds) stays inside
// the bound and drops no one.
//
// Why the client learns it in time (T the session timeout, f the fraction,
// c the check interval, at most 50 ms): the client's last request or ping
// before the partition reached the server at most T/3 before it (ZooKeeper
// clients ping at T/3 when idle), so the majority's leader can expire the
// session no earlier than T - T/3 = 2T/3 after the partition (a new leader
// even gives every session a full T from its takeover). The isolated server
// heard from its leader until the partition and closes the connection at
// most f·T + c after it: the client is told Disconnected at least
// (2/3 - f)·T - c before its session can expire (T/3 - c with the default
// f = 1/3; 1.95 s for a 6 s session). An isolated leader first keeps its
// lease for up to RaftTimeout, but the new leader's full-T grace leaves it
// (1 - f)·T - RaftTimeout - c.

// errLeaderLost closes the connections of a server cut off from its leader.
var errLeaderLost = errors.New("server: no contact with a leader; closing the connection so the client moves to another server")

// leaderContactAge is how long ago this server last heard from a leader
// (zero on the leader; the largest duration if it never has).
func (s *Server) leaderContactAge(now time.Time) time.Duration {
	if s.rep.IsLeader() {
		s.ledAt.Store(now.UnixNano())
		return 0
	}
	lc := s.rep.LastContact()
	// A leader that steps down counts as contact: raft records it too, but
	// only after it reports the new state, and meanwhile its last contact
	// is the one from before it led.
	if led := time.Unix(0, s.ledAt.Load()); s.ledAt.Load() != 0 && led.After(lc) {
		lc = led
	}
	if lc.IsZero() {
		return math.MaxInt64
	}
	return max(now.Sub(lc), 0)
}

// leaderLossBound is how long a session with this timeout stays connected
// to a server that has no contact with a leader.
func (s *Server) leaderLossBound(timeout time.Duration) time.Duration {
	return time.Duration(float64(timeout) * s.cfg.LeaderLossFraction)
}

// Serving reports whether this server serves read-write sessions: it has
// heard from a leader within the bound of the shortest session timeout.
func (s *Server) Serving() bool {
	return s.leaderContactAge(time.Now()) <= s.leaderLossBound(s.cfg.MinSessionTimeout)
}

// ReadOnly reports whether this server is in read-only mode:
// Config.ReadOnlyMode is on and it has not been serving for the read-only
// grace, so it takes read-only sessions (sessions/readonly.go).
func (s *Server) ReadOnly() bool {
	return s.cfg.ReadOnlyMode && s.notServingFor(time.Now()) >= s.readOnlyGrace()
}

// readOnlyGrace is how long a server that stopped serving waits before it
// goes read-only. ZooKeeper 3.8's QuorumPeer starts its
// ReadOnlyZooKeeperServer max(2 s, tickTime) after it starts looking for a
// leader, and only if it is still looking then (a thread that sleeps
// Math.max(2000, tickTime), in its bytecode); a server that has just
// started looks for a leader at once. So a restarted server, or one whose
// leader is a moment away, hands out no read-only sessions: its clients
// wait for a read-write one.
func (s *Server) readOnlyGrace() time.Duration { return max(2*time.Second, s.cfg.Tick) }

// notServingFor is how long this server has not been serving (zero while
// it serves): since its contact with a leader passed the bound of the
// shortest session timeout, or, if it has had no contact since it started,
// since it started (ZooKeeper's peer starts looking for a leader).
func (s *Server) notServingFor(now time.Time) time.Duration {
	age, bound := s.leaderContactAge(now), s.leaderLossBound(s.cfg.MinSessionTimeout)
	switch {
	case age <= bound:
		return 0
	case age == math.MaxInt64:
		return max(now.Sub(s.started), 0)
	}
	return age - bound
}

// errReadWrite closes read-only connections once the server serves again.
var errReadWrite = errors.New("server: in contact with a leader again; closing read-only connections so the clients reconnect read-write")

// waitServing waits, up to the context's deadline, for this server to
// serve.
func (s *Server) waitServing(ctx context.Context) error {
	for !s.Serving() {
		select {
		case <-ctx.Done():
			now := time.Now()
			if age := s.leaderContactAge(now); age != math.MaxInt64 {
				return fmt.Errorf("server: not serving requests (no contact with a leader for %v)", age.Round(time.Millisecond))
			}
			return fmt.Errorf("server: not serving requests (no leader yet, %v after start)", now.Sub(s.started).Round(time.Millisecond))
		case <-s.closing:
			return errClosed
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// leaderLossLoop closes the connections of sessions whose bound has passed
// without contact with a leader. A server that has had no leader since it
// started has lost nothing: it is waiting for its first one, says so once
// if that takes longer than the bound, and serves from the first contact.
func (s *Server) leaderLossLoop() {
	defer s.wg.Done()
	minBound := s.leaderLossBound(s.cfg.MinSessionTimeout)
	t := time.NewTicker(min(max(minBound/8, 5*time.Millisecond), 50*time.Millisecond))
	defer t.Stop()
	// The state the loop last saw: waiting for a first leader (never
	// heard from one since the start), serving, or lost (not serving).
	const (
		waiting = iota
		serving
		lost
	)
	state, served, waitLogged := waiting, false, false
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		now := time.Now()
		age := s.leaderContactAge(now)
		was := state
		switch {
		case age == math.MaxInt64:
			state = waiting
			if !waitLogged && now.Sub(s.started) > minBound {
				waitLogged = true
				s.log.Info("waiting for a leader", "for", now.Sub(s.started).Round(time.Millisecond))
			}
		case age <= minBound:
			state = serving
		default:
			state = lost
		}
		switch {
		case state == was:
		case state == serving:
			if served {
				s.log.Info("serving again: in contact with a leader")
			} else if waitLogged {
				s.log.Info("serving: in contact with a leader")
			}
			served = true
			if n := s.sess.EndReadOnly(errReadWrite); n > 0 {
				s.log.Info("closed read-only connections: the server is read-write again", "connections", n)
			}
		case state == lost:
			s.log.Warn("not serving: no contact with a leader", "for", age.Round(time.Millisecond))
			s.metrics.notServing.Inc()
		}
		if state == serving {
			continue
		}
		since := slog.Duration("for", age.Round(time.Millisecond))
		if state == waiting {
			since = slog.Duration("since_start", now.Sub(s.started).Round(time.Millisecond))
		}
		s.dropUnserved(age, since)
	}
}

// dropUnserved closes the connections whose bound the contact age age has
// passed. age was read before the connections are listed: a connection
// made meanwhile may have been accepted because the server heard from a
// leader (or became one) since, so the age is read again before each
// close. CI once saw a one-server cluster close a session it had just
// opened: the loop read "no leader yet" just before the election, and the
// session it then listed was made after.
func (s *Server) dropUnserved(age time.Duration, since slog.Attr) {
	for _, c := range s.sess.Conns() {
		if c.ReadOnly() || age <= s.leaderLossBound(c.Timeout()) {
			continue
		}
		if now := s.leaderContactAge(time.Now()); now <= s.leaderLossBound(c.Timeout()) {
			continue
		}
		s.log.Info("closing a client connection: no contact with a leader", "session", fmt.Sprintf("0x%x", c.ID()), since)
		s.metrics.leaderLossDrops.Inc()
		c.Shut(errLeaderLost)
	}
}
