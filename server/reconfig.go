package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"coord/api"
	"coord/fsm"
	"coord/server/sessions"
)

// ZooKeeper's reconfig (op 16) mapped onto raft's membership changes.
//
// The checks come in ZooKeeper 3.8's order (PrepRequestProcessor):
// reconfig disabled (Config.DisableReconfig) → ReconfigDisabled; another
// reconfig running on this server → ReconfigInProgress; fromConfig not the
// current version → BadVersion; a malformed server line or id →
// BadArguments; a new server that does not answer at its gRPC address (the
// line's electionPort), or a membership without a voter → NewConfigNoQuorum;
// and last, the caller's identities without WRITE on /zookeeper/config's
// ACL (as ZooKeeper checks; the superuser passes) → NoAuth.
//
// Then, through the leader's Admin service, each server that leaves is
// removed (RemoveServer) and each that joins (or changes role) is added as
// a voter (participant) or non-voter (observer) under the id it reports
// itself, and told to the leader (Join) with its addresses. Last the
// target membership is written to /zookeeper/config (numbered as the
// request numbered it), and the reply is that node's data and Stat, as
// ZooKeeper answers.

// reconfig carries out one reconfig request (the session layer's hook).
func (s *Server) reconfig(ctx context.Context, ids []fsm.Id, a *sessions.ReconfigArgs) *sessions.Reply {
	fail := func(code fsm.Code, why string) *sessions.Reply {
		s.log.Info("reconfig refused", "code", code.String(), "why", why)
		return &sessions.Reply{Err: code}
	}
	if s.cfg.DisableReconfig {
		return fail(fsm.ReconfigDisabled, "reconfig is disabled on this server")
	}
	if !s.reconfigMu.TryLock() {
		return fail(fsm.ReconfigInProgress, "another reconfig runs on this server")
	}
	defer s.reconfigMu.Unlock()
	// Catch up with the leader: the version and membership checked are
	// then the current ones.
	idx, err := s.rep.SyncIndex(ctx)
	if err == nil {
		err = s.rep.WaitApplied(ctx, idx)
	}
	if err != nil {
		return fail(fsm.ConnectionLoss, err.Error())
	}
	current, version := s.currentConfig()
	if a.FromConfig != -1 && a.FromConfig != version {
		return fail(fsm.BadVersion, fmt.Sprintf("fromConfig %x, config version %x", a.FromConfig, version))
	}
	cur := parseConfigText(current)
	target, err := reconfigTarget(cur, a)
	if err != nil {
		return fail(fsm.BadArguments, err.Error())
	}
	if !slices.ContainsFunc(target, func(l configLine) bool { return !l.Observer }) {
		return fail(fsm.NewConfigNoQuorum, "the new membership has no participant")
	}

	// Who is who: raft's configuration names the servers of the current
	// lines (by raft address); a new server says its id itself.
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fail(fsm.ConnectionLoss, err.Error())
	}
	idByAddr := map[string]string{}
	for _, srv := range f.Configuration().Servers {
		idByAddr[string(srv.Address)] = string(srv.ID)
	}
	curByAddr := map[string]configLine{}
	for _, l := range cur {
		curByAddr[l.RaftAddr] = l
	}
	type change struct {
		id   string
		line configLine
	}
	var adds []change
	var removes []string
	inTarget := map[string]bool{}
	for _, l := range target {
		inTarget[l.RaftAddr] = true
		old, ok := curByAddr[l.RaftAddr]
		id := idByAddr[l.RaftAddr]
		if ok && id != "" && old.Observer == l.Observer {
			continue
		}
		if id == "" {
			id, err = s.askID(ctx, l)
			if err != nil {
				return fail(fsm.NewConfigNoQuorum, err.Error())
			}
		} else if ok && old.Observer != l.Observer {
			removes = append(removes, id) // raft changes a role by removing and adding
		}
		adds = append(adds, change{id, l})
	}
	for _, l := range cur {
		if id := idByAddr[l.RaftAddr]; !inTarget[l.RaftAddr] && id != "" {
			removes = append(removes, id)
		}
	}
	acl, _, err := s.rep.View().GetACL("/zookeeper/config", []fsm.Id{{Scheme: "super"}})
	if err != nil || !fsm.CheckACL(acl, fsm.PermWrite, ids) {
		return fail(fsm.NoAuth, "no WRITE permission on /zookeeper/config")
	}

	// Each step is retried until it succeeds or the request's time is up:
	// removing the leader elects another one, which the next steps ask.
	// Every step is idempotent.
	for _, id := range removes {
		s.log.Info("reconfig: removing server", "id", id)
		err := s.onLeader(ctx, func(cc api.AdminClient, _ api.InternalClient) error {
			_, err := cc.RemoveServer(ctx, &api.RemoveServerRequest{Id: id})
			return err
		})
		if err != nil {
			return fail(fsm.ConnectionLoss, "removing "+id+": "+err.Error())
		}
	}
	for _, c := range adds {
		s.log.Info("reconfig: adding server", "id", c.id, "raft", c.line.RaftAddr, "observer", c.line.Observer)
		role := "voter"
		if c.line.Observer {
			role = "observer"
		}
		m := &api.Member{Id: c.id, RaftAddr: c.line.RaftAddr, GrpcAddr: c.line.GRPCAddr(), ZkAddr: c.line.Client, Role: role}
		s.learn(Member{ID: c.id, RaftAddr: m.RaftAddr, GRPCAddr: m.GrpcAddr, ZKAddr: m.ZkAddr, Observer: c.line.Observer})
		err := s.onLeader(ctx, func(admin api.AdminClient, internal api.InternalClient) error {
			if _, err := admin.AddServer(ctx, &api.AddServerRequest{Id: c.id, RaftAddr: c.line.RaftAddr, Observer: c.line.Observer}); err != nil {
				return err
			}
			// Teach the leader the server's addresses and role.
			_, err := internal.Join(ctx, &api.JoinRequest{Member: m})
			return err
		})
		if err != nil {
			return fail(fsm.ConnectionLoss, "adding "+c.id+": "+err.Error())
		}
	}
	var b strings.Builder
	for _, l := range target {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	cmd := &fsm.Command{Type: fsm.CmdSetConfig,
		Op: fsm.Op{Type: fsm.CmdSetConfig, Path: "/zookeeper/config", Data: []byte(b.String()), TTL: -1}}
	for {
		res, err := s.rep.Propose(ctx, cmd)
		if err == nil {
			err = res.Res.Err
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fail(fsm.ConnectionLoss, "writing /zookeeper/config: "+err.Error())
		}
		s.log.Info("reconfig: writing /zookeeper/config again", "err", err)
		time.Sleep(50 * time.Millisecond)
	}
	data, st, err := s.rep.View().GetData("/zookeeper/config", []fsm.Id{{Scheme: "super"}})
	if err != nil {
		return fail(fsm.SystemError, err.Error())
	}
	s.log.Info("reconfig done", "version", fmt.Sprintf("%x", st.Mzxid), "removed", len(removes), "added", len(adds))
	return &sessions.Reply{Body: sessions.BodyData, Data: data, Stat: st}
}

// onLeader runs f on the current leader's Admin and Internal services
// until it succeeds or ctx ends.
func (s *Server) onLeader(ctx context.Context, f func(api.AdminClient, api.InternalClient) error) error {
	for {
		leader, err := s.leaderMember(ctx)
		if err == nil {
			var cc *grpc.ClientConn
			if cc, err = s.peers.get(leader.GRPCAddr); err == nil {
				if err = f(api.NewAdminClient(cc), api.NewInternalClient(cc)); err == nil {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return err
		}
		s.log.Info("reconfig: asking the leader again", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reconfigTarget is the membership a reconfig asks for: NewMembers
// (comma- or newline-separated server lines) if given, else the current
// lines less Leaving (comma-separated ids) and with Joining (comma-separated
// server lines, each with its client port) in place, sorted by id.
func reconfigTarget(cur []configLine, a *sessions.ReconfigArgs) ([]configLine, error) {
	byN := map[int64]configLine{}
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' })
	}
	if strings.TrimSpace(a.NewMembers) != "" {
		for _, item := range split(a.NewMembers) {
			item = strings.TrimSpace(item)
			if !strings.HasPrefix(item, "server.") {
				continue // version= and other properties
			}
			l, err := parseServerLine(item)
			if err != nil {
				return nil, err
			}
			byN[l.N] = l
		}
	} else {
		for _, l := range cur {
			byN[l.N] = l
		}
		for _, item := range split(a.Leaving) {
			n, err := strconv.ParseInt(strings.TrimSpace(item), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("invalid server id: %q", item)
			}
			delete(byN, n)
		}
		for _, item := range split(a.Joining) {
			l, err := parseServerLine(item)
			if err != nil {
				return nil, err
			}
			if l.Client == "" {
				return nil, fmt.Errorf("%q: each server needs its client port", item)
			}
			byN[l.N] = l
		}
	}
	out := make([]configLine, 0, len(byN))
	addrs := map[string]bool{}
	for _, l := range byN {
		if addrs[l.RaftAddr] {
			return nil, fmt.Errorf("two servers at %s", l.RaftAddr)
		}
		addrs[l.RaftAddr] = true
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b configLine) int { return int(a.N - b.N) })
	return out, nil
}

// askID asks a server that is to join, at the gRPC address its line gives,
// for its id, and checks that its raft address is the line's.
func (s *Server) askID(ctx context.Context, l configLine) (string, error) {
	cc, err := s.peers.get(l.GRPCAddr())
	if err != nil {
		return "", fmt.Errorf("server.%d at %s: %w", l.N, l.GRPCAddr(), err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*s.cfg.RaftTimeout)
	defer cancel()
	st, err := api.NewAdminClient(cc).Status(cctx, &api.StatusRequest{})
	if err != nil {
		return "", fmt.Errorf("server.%d does not answer at %s: %w", l.N, l.GRPCAddr(), err)
	}
	// The server's raft address is only known to raft itself; check what
	// the server remembers of itself when it can tell.
	resp, err := api.NewAdminClient(cc).Members(cctx, &api.MembersRequest{})
	if err == nil {
		for _, m := range resp.Members {
			if m.Id == st.Id && m.RaftAddr != "" && m.RaftAddr != l.RaftAddr {
				return "", fmt.Errorf("server.%d: %s has raft address %s, not %s", l.N, st.Id, m.RaftAddr, l.RaftAddr)
			}
		}
	}
	return st.Id, nil
}
