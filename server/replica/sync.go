package replica

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/hashicorp/raft"

	"coord/api"
)

// SyncIndex returns an index such that once this server has applied it,
// it has applied everything committed before the call (ZooKeeper's sync).
func (r *Replica) SyncIndex(ctx context.Context) (uint64, error) {
	if r.raft.State() == raft.Leader {
		return r.ReadIndex()
	}
	_, addr, err := r.Leader(ctx)
	if err != nil {
		return 0, err
	}
	cc, err := r.peers.conn(addr)
	if err != nil {
		return 0, err
	}
	// Wait for the connection (bounded by ctx) rather than fail at once
	// while it is between attempts: right after a partition heals, raft is
	// in contact again before this channel has redialled the leader.
	resp, err := api.NewInternalClient(cc).ReadIndex(ctx, &api.ReadIndexRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return 0, err
	}
	return resp.Index, nil
}

// ReadIndex answers sync on the leader: once a barrier through the log has
// been applied here (so this server still leads and has applied everything
// committed before the call), the applied index is one every follower may
// wait for.
func (r *Replica) ReadIndex() (uint64, error) {
	if r.raft.State() != raft.Leader {
		return 0, raft.ErrNotLeader
	}
	if err := r.raft.Barrier(r.LeaderWait()).Error(); err != nil {
		return 0, err
	}
	return r.fsm.applied.Load(), nil
}

// WaitApplied blocks until this server has applied index (Applied). An
// index past the state machine's can be reached by a commit alone (a no-op
// or barrier entry), which no apply signals: that is looked for every
// CommitTimeout.
func (r *Replica) WaitApplied(ctx context.Context, index uint64) error {
	var poll *time.Timer
	for {
		ch := r.fsm.appliedChanged()
		if r.fsm.applied.Load() >= index || r.Applied() >= index {
			return nil
		}
		if poll == nil {
			poll = time.NewTimer(max(r.cfg.CommitTimeout, time.Millisecond))
			defer poll.Stop()
		} else {
			poll.Reset(max(r.cfg.CommitTimeout, time.Millisecond))
		}
		select {
		case <-ch:
		case <-poll.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.closing:
			return ErrClosed
		}
	}
}
