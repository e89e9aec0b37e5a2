package replica

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"

	"coord/fsm"
)

// errSelfLeader: raft names this server as leader (it may still be taking
// over).
var errSelfLeader = errors.New("server: this server is the leader")

// Submit sends cmd to the log on behalf of this server without waiting;
// done runs once with the outcome: inside apply when this server applies the
// entry (after the Observer's Applied for it), or from elsewhere when it is
// known never to (done may then run before Submit returns). Calls made one
// after another keep their order in the log, which is what keeps a
// session's writes in order.
func (r *Replica) Submit(cmd *fsm.Command, done func(Result)) {
	seq := r.seq.Add(1)
	r.fsm.expect(seq, cmd, done)
	fail := func(err error) { r.fsm.complete(seq, Result{Err: err}) }
	select {
	case <-r.closing:
		fail(ErrClosed)
		return
	default:
	}
	if r.diskLow.Load() && cmd.Type != fsm.CmdCloseSession {
		fail(ErrDiskFull)
		return
	}
	if r.raft.State() == raft.Leader {
		r.proposeOwn(seq, cmd, fail)
		return
	}
	r.fwd.send(seq, cmd, fail)
}

// proposeOwn hands this leader's own command to the proposer; its outcome
// arrives through apply, so only a failure is reported here.
func (r *Replica) proposeOwn(seq uint64, cmd *fsm.Command, fail func(error)) {
	r.prop.propose(r.origin, seq, cmd, func(err error, _ uint64) {
		if err != nil {
			fail(err)
		}
	})
}

// Propose is Submit and wait.
func (r *Replica) Propose(ctx context.Context, cmd *fsm.Command) (Result, error) {
	ch := make(chan Result, 1)
	r.Submit(cmd, func(res Result) { ch <- res })
	select {
	case res := <-ch:
		return res, res.Err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}
