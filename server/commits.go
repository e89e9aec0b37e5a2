package server

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

// Commits streams this leader's applied position.
func (i *internalService) Commits(req *api.CommitsRequest, stream api.Internal_CommitsServer) error {
	s := i.s
	if s.raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	var sent uint64
	for {
		changed := s.fsm.committedChanged()
		if p := s.fsm.committed.Load(); p != nil && p.index > sent {
			if err := stream.Send(&api.CommitPosition{Index: p.index, Term: p.term}); err != nil {
				return err
			}
			sent = p.index
		}
		select {
		case <-changed:
		case <-time.After(s.cfg.RaftTimeout):
			// A leader that lost its place ends the stream, so the
			// follower turns to the new one.
			if s.raft.State() != raft.Leader {
				return raft.ErrNotLeader
			}
		case <-stream.Context().Done():
			return nil
		case <-s.closing:
			return errClosed
		}
	}
}

// followCommits keeps a Commits stream from the current leader while this
// server is not the leader, and applies what it learns.
func (s *Server) followCommits() {
	defer s.wg.Done()
	for {
		select {
		case <-s.closing:
			return
		default:
		}
		if !s.followCommitsOnce() {
			select {
			case <-s.closing:
				return
			case <-time.After(s.cfg.RaftTimeout / 4):
			}
		}
	}
}

// followCommitsOnce follows one leader's stream until it ends or raft names
// another leader. It reports whether it got as far as a stream.
func (s *Server) followCommitsOnce() bool {
	_, leaderID := s.raft.LeaderWithID()
	if leaderID == "" || string(leaderID) == s.cfg.ID {
		return false
	}
	lctx, lcancel := context.WithTimeout(context.Background(), s.leaderWait())
	m, err := s.leaderMember(lctx)
	lcancel()
	if err != nil || m.ID != string(leaderID) {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cc, err := s.peers.get(m.GRPCAddr)
	if err != nil {
		return false
	}
	stream, err := api.NewInternalClient(cc).Commits(ctx, &api.CommitsRequest{ServerId: s.cfg.ID})
	if err != nil {
		return false
	}
	// Stop following when raft names another leader or this server closes;
	// a partitioned leader's stream would otherwise just go quiet.
	go func() {
		t := time.NewTicker(s.cfg.RaftTimeout / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.closing:
				cancel()
				return
			case <-t.C:
				if _, id := s.raft.LeaderWithID(); string(id) != m.ID {
					cancel()
					return
				}
			}
		}
	}()
	for {
		p, err := stream.Recv()
		if err != nil {
			return true
		}
		s.fsm.learnCommit(position{index: p.Index, term: p.Term})
	}
}

// kickingLogStore wakes the applier whenever raft stores entries, so a
// commit learned before its entry arrived applies as soon as it does.
type kickingLogStore struct {
	raft.LogStore
	fsm *raftFSM
}

func (k kickingLogStore) StoreLog(l *raft.Log) error {
	err := k.LogStore.StoreLog(l)
	k.fsm.wakeApplier()
	return err
}

func (k kickingLogStore) StoreLogs(logs []*raft.Log) error {
	err := k.LogStore.StoreLogs(logs)
	k.fsm.wakeApplier()
	return err
}
