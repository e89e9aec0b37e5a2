package replica

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"coord/api"
)

// Raft tells a follower that an entry committed only with the leader's next
// AppendEntries: at once when more entries follow, else after
// CommitTimeout, and only once the follower has stored whatever that
// message carries. ZooKeeper's leader sends COMMIT to its followers as it
// commits. coord does the same beside raft: each follower and observer
// keeps a Commits stream from the leader, which sends the index and term of
// the last entry it is about to apply whenever that moves (before the apply
// queues its responses), and the follower applies
// its log up to there at once when it holds that entry (raft's log
// matching; raftFSM.fastApply). Raft's own apply of the same entries later
// finds them applied.

// ServeCommits streams this leader's applied position (the Internal
// service's Commits).
func (r *Replica) ServeCommits(stream api.Internal_CommitsServer) error {
	if r.raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	var sent uint64
	for {
		changed := r.fsm.committedChanged()
		if p := r.fsm.committed.Load(); p != nil && p.index > sent {
			if err := stream.Send(&api.CommitPosition{Index: p.index, Term: p.term}); err != nil {
				return err
			}
			sent = p.index
		}
		select {
		case <-changed:
		case <-time.After(r.cfg.RaftTimeout):
			// A leader that lost its place ends the stream, so the
			// follower turns to the new one.
			if r.raft.State() != raft.Leader {
				return raft.ErrNotLeader
			}
		case <-stream.Context().Done():
			return nil
		case <-r.closing:
			return ErrClosed
		}
	}
}

// followLeader runs once (following one leader: its Commits stream, or
// its commit notices) again and again until this server closes. After a
// try that got nowhere it waits until raft names a leader (or changes
// role or peers), at most a quarter of RaftTimeout: a new leader's
// followers hear its commits from its first write on.
func (r *Replica) followLeader(once func() bool) {
	defer r.wg.Done()
	for {
		select {
		case <-r.closing:
			return
		default:
		}
		changed := r.roleChanged()
		if !once() {
			select {
			case <-r.closing:
				return
			case <-changed:
			case <-time.After(r.cfg.RaftTimeout / 4):
			}
		}
	}
}

// leaderToFollow is the leader raft names and its peer address, when there
// is one and it is not this server.
func (r *Replica) leaderToFollow() (id, addr string, ok bool) {
	_, leaderID := r.raft.LeaderWithID()
	if leaderID == "" || string(leaderID) == r.cfg.ID {
		return "", "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.LeaderWait())
	defer cancel()
	id, addr, err := r.Leader(ctx)
	if err != nil || id != string(leaderID) {
		return "", "", false
	}
	return id, addr, true
}

// followCommitsOnce follows one leader's stream until it ends or raft names
// another leader. It reports whether it got as far as a stream.
func (r *Replica) followCommitsOnce() bool {
	if r.noticesUp.Load() {
		return false // the notices carry the positions (notices.go)
	}
	id, addr, ok := r.leaderToFollow()
	if !ok {
		return false
	}
	// Stop following when raft names another leader, the notices take
	// over, or this server closes; a partitioned leader's stream would
	// otherwise just go quiet.
	ctx, cancel := r.whileLeads(context.Background(), id, r.cfg.RaftTimeout/2, r.noticesUp.Load)
	defer cancel()
	cc, err := r.peers.conn(addr)
	if err != nil {
		return false
	}
	stream, err := api.NewInternalClient(cc).Commits(ctx, &api.CommitsRequest{ServerId: r.cfg.ID})
	if err != nil {
		return false
	}
	for {
		p, err := stream.Recv()
		if err != nil {
			return true
		}
		r.fsm.learnCommit(position{index: p.Index, term: p.Term})
	}
}

// kickingLogStore wakes the applier when raft stores entries while a
// commit learned from the leader waits to apply, so a commit learned before
// its entry arrived applies as soon as it does. Only then: on a leader (and
// on a follower whose notices come after its appends, the usual order) a
// wake on every append would have the applier take a CPU for nothing right
// when raft's replication needs one (a runtime trace of a 1×1 write load
// showed ~90 µs of scheduling delay per write on this path;
// docs/benchmarks.md). A commit learned after this check kicks the applier
// itself, and finds these entries stored.
type kickingLogStore struct {
	raft.LogStore
	fsm *raftFSM
}

func (k kickingLogStore) StoreLog(l *raft.Log) error { return k.StoreLogs([]*raft.Log{l}) }

// GetLog reads an entry for raft; during the startup replay its commands
// are decoded here, on raft's goroutine, ahead of the apply (predecode.go).
func (k kickingLogStore) GetLog(index uint64, l *raft.Log) error {
	err := k.LogStore.GetLog(index, l)
	if err == nil {
		k.fsm.predecode(l)
	}
	return err
}

func (k kickingLogStore) StoreLogs(logs []*raft.Log) error {
	err := k.LogStore.StoreLogs(logs)
	if err == nil {
		for i := len(logs) - 1; i >= 0; i-- {
			if t := logs[i].Type; t == raft.LogCommand || t == raft.LogConfiguration {
				k.fsm.held.Store(logs[i].Index)
				break
			}
		}
	}
	if p := k.fsm.want.Load(); p != nil && p.index > k.fsm.applied.Load() {
		k.fsm.wakeApplier()
	}
	return err
}

// DeleteRange forgets the last held command when the tail goes (raft
// drops a conflicting suffix, or empties the log for a snapshot).
func (k kickingLogStore) DeleteRange(min, max uint64) error {
	if max >= k.fsm.held.Load() {
		k.fsm.held.Store(0)
	}
	return k.LogStore.DeleteRange(min, max)
}

// IsMonotonic passes on whether the store refuses gaps (raft-wal does):
// raft then empties the log after installing a snapshot instead of
// leaving a gap before the entries that follow it, which such a store
// would refuse (raft.MonotonicLogStore; the wrapper must not hide it).
func (k kickingLogStore) IsMonotonic() bool {
	m, ok := k.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// WhileLeads returns a context derived from parent that ends as soon as
// raft names a leader other than id (or none), or the replica closes: a
// call to a leader that has gone ends then rather than at its deadline.
func (r *Replica) WhileLeads(parent context.Context, id string) (context.Context, context.CancelFunc) {
	return r.whileLeads(parent, id, 20*time.Millisecond, nil)
}

// whileLeads is WhileLeads checking every period, also ending once stop
// (if not nil) reports true.
func (r *Replica) whileLeads(parent context.Context, id string, every time.Duration, stop func() bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.closing:
				cancel()
				return
			case <-t.C:
				if _, now := r.raft.LeaderWithID(); string(now) != id || (stop != nil && stop()) {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}
