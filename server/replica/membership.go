package replica

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// The replica is the one package that speaks to hashicorp/raft: the server
// asks it for its role, the configuration and membership changes in these
// terms.

// Role is this server's state in raft.
type Role int

// The raft roles.
const (
	Follower Role = iota
	Candidate
	Leader
	Shutdown
)

// Role is this server's raft role now.
func (r *Replica) Role() Role {
	switch r.raft.State() {
	case raft.Leader:
		return Leader
	case raft.Candidate:
		return Candidate
	case raft.Shutdown:
		return Shutdown
	}
	return Follower
}

// Member is a server in raft's configuration.
type Member struct {
	ID    string
	Addr  string // its raft (peer plane) address
	Voter bool   // false: a non-voter (an observer, or a voter catching up)
}

// Configuration is the latest raft configuration this server knows.
func (r *Replica) Configuration() ([]Member, error) {
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// LeaderWithID is the leader's raft address and id as this server knows
// them ("" for none).
func (r *Replica) LeaderWithID() (addr, id string) {
	a, i := r.raft.LeaderWithID()
	return string(a), string(i)
}

// Term is the current raft term.
func (r *Replica) Term() uint64 { return r.raft.CurrentTerm() }

// CommitIndex is the raft commit index as this server knows it.
func (r *Replica) CommitIndex() uint64 { return r.raft.CommitIndex() }

// Settled reports whether this server leads and has applied every entry
// logged before it began to: a new leader applies its predecessors'
// entries only once an entry of its own term commits, and until then its
// state (/zookeeper/config's roles, say) may be older than what the
// cluster already decided. A leader's decisions read from that state wait
// for Settled.
func (r *Replica) Settled() bool {
	if r.raft.State() != raft.Leader {
		return false
	}
	term := r.raft.CurrentTerm()
	r.settleMu.Lock()
	if r.settleTerm != term {
		// Read after the term: every entry of an earlier term is at or
		// below the last index now.
		r.settleTerm, r.settleFrom = term, r.raft.LastIndex()
	}
	from := r.settleFrom
	r.settleMu.Unlock()
	return r.Applied() >= from
}

// LastContact is when this server last heard from a leader.
func (r *Replica) LastContact() time.Time { return r.raft.LastContact() }

// ErrNotLeader: a membership change asked of a server that does not lead.
var ErrNotLeader = raft.ErrNotLeader

// AddVoter adds a server as a voter (or promotes a non-voter), on the
// leader.
func (r *Replica) AddVoter(id, addr string, timeout time.Duration) error {
	return r.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout).Error()
}

// AddNonvoter adds a server as a non-voter, on the leader.
func (r *Replica) AddNonvoter(id, addr string, timeout time.Duration) error {
	return r.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout).Error()
}

// RemoveServer removes a server from the configuration, on the leader,
// and returns the index of the configuration entry without it.
func (r *Replica) RemoveServer(id string, timeout time.Duration) (uint64, error) {
	f := r.raft.RemoveServer(raft.ServerID(id), 0, timeout)
	if err := f.Error(); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// LastIndex is the index of the last entry in this server's raft log (0
// for an empty log).
func (r *Replica) LastIndex() uint64 { return r.raft.LastIndex() }

// TransferLeadership hands leadership to the voter id (any suitable voter
// if id is ""), on the leader. Raft gives one try an election timeout
// (RaftTimeout) for the target to catch up and win, which a loaded machine
// can miss; so a try that timed out while this server still leads is made
// again, one RaftTimeout later, until ctx is done or for at most
// transferTries RaftTimeouts. A target that won after its try timed out
// counts as a transfer.
func (r *Replica) TransferLeadership(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, transferTries*r.cfg.RaftTimeout)
	defer cancel()
	addr := raft.ServerAddress("")
	if id != "" {
		cfg, err := r.Configuration()
		if err != nil {
			return err
		}
		for _, m := range cfg {
			if m.ID == id {
				addr = raft.ServerAddress(m.Addr)
			}
		}
		if addr == "" {
			return errors.New("server: no such server in the configuration")
		}
	}
	for {
		var err error
		if id == "" {
			err = r.raft.LeadershipTransfer().Error()
		} else {
			err = r.raft.LeadershipTransferToServer(raft.ServerID(id), addr).Error()
		}
		if err == nil || !transferTimedOut(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(r.cfg.RaftTimeout):
		}
		if r.raft.State() != raft.Leader {
			return nil
		}
	}
}

// transferTries bounds how long TransferLeadership tries, in RaftTimeouts
// (4.5 s at the default 150 ms), for callers whose ctx has no deadline.
const transferTries = 30

// transferTimedOut reports a leadership transfer that ran out of time, or
// that found the previous try still winding down: raft reports the first
// only as text.
func transferTimedOut(err error) bool {
	return errors.Is(err, raft.ErrLeadershipTransferInProgress) || strings.Contains(err.Error(), "leadership transfer timeout")
}

// TakeSnapshot asks raft for a snapshot now and returns its last index.
func (r *Replica) TakeSnapshot() (uint64, error) {
	f := r.raft.Snapshot()
	if err := f.Error(); err != nil {
		return 0, err
	}
	meta, rc, err := f.Open()
	if err != nil {
		return 0, err
	}
	rc.Close()
	return meta.Index, nil
}

// Barrier waits until every entry before it has been applied here (on the
// leader).
func (r *Replica) Barrier(timeout time.Duration) error { return r.raft.Barrier(timeout).Error() }

// Stores are raft stores handed to a replica instead of its own under
// DataDir (all three or none): tests use raft's in-memory stores.
type Stores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
}
