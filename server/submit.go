package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"coord/fsm"
)

// errRefused marks an error of a command refused before it reached the log:
// nothing changed, so the client gets an error answer and keeps its
// connection (unlike a command whose fate is unknown). It crosses a
// forward as ForwardResponse.refused.
var errRefused = errors.New("refused before the log")

// errDiskFull: the data directory is below Config.MinFreeDisk.
var errDiskFull = fmt.Errorf("server: disk nearly full, refusing writes (%w)", errRefused)

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

// leaderWait is how long a request waits for a leader to appear.
func (s *Server) leaderWait() time.Duration { return 4 * s.cfg.RaftTimeout }
