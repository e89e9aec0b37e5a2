package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"coord/api"
	"coord/server/replica"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A server learns the other servers' addresses from its configuration,
// from gossip and from the servers it asks (join, discover). Raft's own
// configuration holds only raft addresses, so a server that restarts
// knowing none of the others' gRPC addresses (the one that bootstrapped a
// cluster the others joined, say) could not reach a leader other than
// itself. It keeps what it learned in its data directory and reads it back
// at start; configured peers win over remembered ones.

const membersFile = "members.json"

// memberFile writes the members file when what it would hold changes.
type memberFile struct {
	mu   sync.Mutex
	last []byte
}

// loadMembers adds the remembered servers this server has no configured
// addresses for.
func (s *Server) loadMembers() {
	b, err := os.ReadFile(filepath.Join(s.cfg.DataDir, membersFile))
	if err != nil {
		if !os.IsNotExist(err) {
			s.log.Warn("reading remembered members", "err", err)
		}
		return
	}
	var list []Member
	if err := json.Unmarshal(b, &list); err != nil {
		s.log.Warn("ignoring unreadable members file", "file", membersFile, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range list {
		if _, ok := s.members[m.ID]; !ok && m.ID != "" && m.ID != s.cfg.ID {
			s.members[m.ID] = m
		}
	}
}

// saveMembers writes the known servers other than this one to the members
// file (a temporary file renamed over it), if they changed.
func (s *Server) saveMembers() {
	s.mu.Lock()
	list := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		if m.ID != s.cfg.ID {
			list = append(list, m)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return
	}
	f := &s.memberFile
	f.mu.Lock()
	defer f.mu.Unlock()
	if bytes.Equal(b, f.last) {
		return
	}
	if err := writeFileAtomic(filepath.Join(s.cfg.DataDir, membersFile), b, 0o640); err != nil {
		s.log.Warn("remembering members", "err", err)
		return
	}
	f.last = b
}

// writeFileAtomic replaces path with b: a reader sees the old file or the
// new one, never a part, and after a power loss too (the data is synced
// before the rename, the directory after it).
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("server: writing %s: %w", path, err)
	}
	// The new name is durable once its directory is.
	return replica.SyncDir(filepath.Dir(path))
}

// discover learns the addresses of the cluster's servers from the servers
// this one knows and the ones raft's configuration lists (on their peer
// plane: a server added by its raft address alone, as coordctl add-voter
// does, tells its gRPC and ZooKeeper addresses itself).
func (s *Server) discover(ctx context.Context) {
	seen := map[string]bool{}
	var addrs []string
	add := func(id, addr string) {
		if id != s.cfg.ID && addr != "" && !seen[addr] {
			seen[addr] = true
			addrs = append(addrs, addr)
		}
	}
	if servers, err := s.rep.Configuration(); err == nil {
		for _, m := range servers {
			add(m.ID, m.Addr)
		}
	}
	s.mu.Lock()
	for _, m := range s.members {
		add(m.ID, m.RaftAddr)
	}
	s.mu.Unlock()
	for _, addr := range addrs {
		cc, err := s.rep.PeerConn(addr)
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.RaftTimeout)
		resp, err := api.NewAdminClient(cc).Members(cctx, &api.MembersRequest{})
		cancel()
		if err != nil {
			continue
		}
		s.mu.Lock()
		for _, m := range resp.Members {
			if m.GrpcAddr == "" || m.Id == s.cfg.ID {
				continue
			}
			// Members reports raft suffrage, not the configured role (a
			// voter still catching up is a non-voter): keep what is known.
			known, ok := s.members[m.Id]
			if !ok {
				known = Member{ID: m.Id, Observer: m.Role == "observer"}
			}
			known.RaftAddr, known.GRPCAddr = m.RaftAddr, m.GrpcAddr
			if m.ZkAddr != "" {
				known.ZKAddr = m.ZkAddr
			}
			s.members[m.Id] = known
		}
		s.mu.Unlock()
		s.saveMembers()
	}
}

// setRole records the role an operator gives a server (leader): in the
// members table and for /zookeeper/config's next text.
func (s *Server) setRole(id, raftAddr string, observer bool) {
	if id != s.cfg.ID {
		s.mu.Lock()
		m := s.members[id]
		m.ID, m.RaftAddr, m.Observer = id, raftAddr, observer
		s.members[id] = m
		s.mu.Unlock()
		s.saveMembers()
	}
	s.reconf.SetRole(raftAddr, observer)
}

// learn records a server's addresses.
func (s *Server) learn(m Member) {
	if m.ID == s.cfg.ID {
		return
	}
	s.mu.Lock()
	if m.ZKAddr == "" {
		m.ZKAddr = s.members[m.ID].ZKAddr
	}
	s.members[m.ID] = m
	s.mu.Unlock()
	s.saveMembers()
}

func (s *Server) memberList() []*api.Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*api.Member, 0, len(s.members))
	for _, m := range s.members {
		role := "voter"
		if m.Observer {
			role = "observer"
		}
		out = append(out, &api.Member{Id: m.ID, RaftAddr: m.RaftAddr, GrpcAddr: m.GRPCAddr, ZkAddr: m.ZKAddr, Role: role})
	}
	slices.SortFunc(out, func(a, b *api.Member) int {
		if a.Id < b.Id {
			return -1
		}
		if a.Id > b.Id {
			return 1
		}
		return 0
	})
	return out
}

// inConfiguration reports whether raft's configuration lists this server.
func (s *Server) inConfiguration() bool {
	servers, err := s.rep.Configuration()
	if err != nil {
		return false
	}
	for _, srv := range servers {
		if srv.ID == s.cfg.ID {
			return true
		}
	}
	return false
}

// join asks the known servers to add this one to the cluster.
func (s *Server) join() {
	s.mu.Lock()
	var targets []Member
	for _, m := range s.members {
		if m.ID != s.cfg.ID && m.RaftAddr != "" {
			targets = append(targets, m)
		}
	}
	self := s.members[s.cfg.ID]
	s.mu.Unlock()
	for _, addr := range s.cfg.Join {
		targets = append(targets, Member{ID: addr, RaftAddr: addr})
	}
	role := "voter"
	if s.cfg.Observer {
		role = "observer"
	}
	req := &api.JoinRequest{Member: &api.Member{Id: s.cfg.ID, RaftAddr: s.RaftAddr(), GrpcAddr: self.GRPCAddr, ZkAddr: self.ZKAddr, Role: role},
		// Once: a later request must not have it removed again.
		Rebuild: s.cfg.Rebuild && !s.rebuildAsked.Load(), LastIndex: s.rep.LastIndex()}
	for _, m := range targets {
		cc, err := s.rep.PeerConn(m.RaftAddr)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.RaftTimeout)
		resp, err := api.NewInternalClient(cc).Join(ctx, req)
		cancel()
		if status.Code(err) == codes.FailedPrecondition {
			// The leader says an operator removed this server
			// (refuseRemoved): stop asking.
			s.joinRefused.Store(true)
			s.log.Debug("join refused", "via", m.ID, "err", err)
			return
		}
		if err != nil {
			s.log.Debug("join", "via", m.ID, "err", err)
			continue
		}
		if req.Rebuild {
			s.rebuildAsked.Store(true)
			s.log.Info("rebuilding from the cluster: the leader removed this server and adds it back", "via", m.ID)
		}
		for _, am := range resp.Members {
			s.learn(Member{ID: am.Id, RaftAddr: am.RaftAddr, GRPCAddr: am.GrpcAddr, ZKAddr: am.ZkAddr, Observer: am.Role == "observer"})
		}
		return
	}
}

// reconcileMembers (leader only) adds joiner (a server that asked to join,
// if any) to the raft configuration as a non-voter, and promotes a
// non-voter that /zookeeper/config makes a participant (one that asked to
// join as a voter, or was one before an empty restart) once it has caught
// up with the log; one an operator or a reconfig made an observer stays
// one, under this leader and the next. It adds no other server: a known server missing from the
// configuration may be one an operator removed, and a server that wants in
// asks (join), again until it is in.
func (s *Server) reconcileMembers(joiner *Member) {
	if !s.rep.IsLeader() {
		return
	}
	servers, err := s.rep.Configuration()
	if err != nil {
		return
	}
	inConfig := map[string]bool{} // id: voter
	for _, srv := range servers {
		inConfig[srv.ID] = srv.Voter
	}
	if joiner != nil {
		if _, ok := inConfig[joiner.ID]; !ok {
			s.log.Info("adding server as non-voter", "id", joiner.ID, "raft", joiner.RaftAddr)
			if err := s.rep.AddNonvoter(joiner.ID, joiner.RaftAddr, s.leaderWait()); err != nil {
				s.log.Warn("adding server", "id", joiner.ID, "err", err)
			}
			return
		}
	}
	if !s.rep.Settled() {
		// Which non-voters are participants is in /zookeeper/config, which
		// a new leader may not have applied yet: an observer a reconfig
		// added must not be promoted on the text from before it.
		return
	}
	s.mu.Lock()
	members := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		members = append(members, m)
	}
	s.mu.Unlock()
	for _, m := range members {
		if voter, ok := inConfig[m.ID]; ok && !voter && s.reconf.Participant(m.ID) && s.caughtUp(m) {
			s.log.Info("promoting caught-up server to voter", "id", m.ID)
			if err := s.rep.AddVoter(m.ID, m.RaftAddr, s.leaderWait()); err != nil {
				s.log.Warn("promoting server", "id", m.ID, "err", err)
			}
		}
	}
}

// caughtUp asks a server how far it has applied the log.
func (s *Server) caughtUp(m Member) bool {
	cc, err := s.rep.PeerConn(m.RaftAddr)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RaftTimeout)
	defer cancel()
	st, err := api.NewAdminClient(cc).Status(ctx, &api.StatusRequest{})
	if err != nil {
		return false
	}
	return st.AppliedIndex+uint64(s.cfg.SnapshotThreshold/10)+64 >= s.rep.CommitIndex()
}
