package server

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/fsm"
	"coord/server/replica"
	"coord/vocab"
)

// adminService serves operators (coordctl) and the leader's catch-up checks.
// Status, Members and Samples answer anyone (as ZooKeeper's srvr, its
// world-readable /zookeeper/config and /metrics do); every other method
// reveals data or sessions or changes the cluster and first asks authorize
// who is calling.
type adminService struct {
	api.UnimplementedAdminServer
	s *Server
	// peer: this instance serves the peer plane, whose callers are members
	// the listener authenticated before any protocol byte; they may call
	// everything.
	peer bool
	// caller, with peer, names who asked in the audit log (the console's
	// signed-in admin) instead of "peer:".
	caller string
}

// authorize lets an Admin call named what go on if the caller is an admin
// identity: a member on the peer plane; a caller that sends the superuser's
// user and password (api.AdminDigestMetadata, checked against
// Config.SuperDigest in constant time); or a caller whose verified client
// certificate's x509 identity is in Config.AdminX509. Otherwise it answers
// Unauthenticated if the caller sent no credentials, PermissionDenied if
// what it sent proves nothing (or if this server has no admin identity
// configured at all), saying which and how to fix it.
func (a *adminService) authorize(ctx context.Context, what string) error {
	if a.peer {
		return nil
	}
	cfg := &a.s.cfg
	if cfg.SuperDigest == "" && len(cfg.AdminX509) == 0 {
		return a.refuse(ctx, what, status.Errorf(codes.PermissionDenied,
			"admin call %s is refused: this server has no admin identity configured; start it with -super-digest user:base64-sha1 "+
				"(then coordctl --user user:password) or -admin-x509 with the subjects of admin client certificates "+
				"(then coordctl --cert/--key)", what))
	}
	var why []string
	var given []string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		given = md.Get(api.AdminDigestMetadata)
	}
	switch {
	case len(given) > 1:
		why = append(why, "more than one "+api.AdminDigestMetadata+" was sent")
	case len(given) == 1:
		user, _, _ := strings.Cut(given[0], ":")
		switch {
		case cfg.SuperDigest == "":
			why = append(why, fmt.Sprintf("user %q: this server has no -super-digest", user))
		case superDigestMatches(given[0], cfg.SuperDigest):
			return nil
		default:
			why = append(why, fmt.Sprintf("user %q with that password is not this server's -super-digest user", user))
		}
	}
	if id, ok := callerX509(ctx); ok {
		if slices.Contains(cfg.AdminX509, id.ID) {
			return nil
		}
		why = append(why, fmt.Sprintf("client certificate %q is not in this server's -admin-x509", id.ID))
	}
	if len(why) == 0 {
		return a.refuse(ctx, what, status.Errorf(codes.Unauthenticated,
			"admin call %s needs an admin identity: coordctl --user super:password (the -super-digest user) "+
				"or a client certificate listed in -admin-x509", what))
	}
	return a.refuse(ctx, what, status.Errorf(codes.PermissionDenied, "admin call %s is refused: %s", what, strings.Join(why, "; ")))
}

// who names an authorized Admin call's caller for the audit log: "peer:"
// for a member, the superuser's name, or "x509:" and the certificate's
// subject.
func (a *adminService) who(ctx context.Context) string {
	if a.peer {
		if a.caller != "" {
			return a.caller
		}
		return "peer:"
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if given := md.Get(api.AdminDigestMetadata); len(given) == 1 && superDigestMatches(given[0], a.s.cfg.SuperDigest) {
			user, _, _ := strings.Cut(given[0], ":")
			return user
		}
	}
	if id, ok := callerX509(ctx); ok {
		return "x509:" + id.ID
	}
	return ""
}

// refuse logs a refused Admin call and returns err.
func (a *adminService) refuse(ctx context.Context, what string, err error) error {
	from := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	a.s.log.Warn("admin call refused", "call", what, "from", from, "code", status.Code(err).String())
	return err
}

// superDigestMatches reports whether userPassword ("user:password", as a
// digest auth packet carries it) hashes to the digest id superDigest,
// comparing in constant time.
func superDigestMatches(userPassword, superDigest string) bool {
	id, err := fsm.ParseAuthDigest(userPassword)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(id.ID), []byte(superDigest)) == 1
}

// callerX509 is the x509 identity of an Admin call's verified client
// certificate, if it came over TLS with one.
func callerX509(ctx context.Context) (vocab.Id, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return vocab.Id{}, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return vocab.Id{}, false
	}
	return x509Identity(&info.State)
}

// SplitAdminX509 splits a list of certificate subjects separated by ';'
// (-admin-x509): RFC 2253 subjects hold ',' and '+' but a ';' in one is
// escaped ("\;"), and such a ';' does not split. Entries are trimmed;
// empty ones are dropped.
func SplitAdminX509(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped character, whatever it is
		case ';':
			if e := strings.TrimSpace(s[start:i]); e != "" {
				out = append(out, e)
			}
			start = i + 1
		}
	}
	if e := strings.TrimSpace(s[start:]); e != "" {
		out = append(out, e)
	}
	return out
}

func (a *adminService) Status(ctx context.Context, _ *api.StatusRequest) (*api.StatusResponse, error) {
	s := a.s
	v := s.rep.View()
	addr, leaderID := s.rep.LeaderWithID()
	sessions := s.sess.Sessions()
	return &api.StatusResponse{
		Id: s.cfg.ID, Role: s.Role(), LeaderId: leaderID, LeaderAddr: addr,
		Term: s.rep.Term(), CommitIndex: s.rep.CommitIndex(), AppliedIndex: s.rep.Applied(),
		LastZxid: int64(v.LastZxid()), Znodes: int64(v.NodeCount()), Sessions: int64(sessions),
		Watches: int64(s.sess.Watches().Len()), UptimeMs: time.Since(s.started).Milliseconds(), DbBytes: s.dbBytes(),
		HttpAddr: s.HTTPAddr(),
	}, nil
}

// dbBytes is what the raft log store uses of its files: the bytes written
// in raft-wal's segments, or bbolt's pages in use; not the room either
// keeps ahead of use (replica.LogStoreUsedBytes; 0 with stores handed in).
func (s *Server) dbBytes() int64 { return s.rep.LogStoreUsedBytes() }

// errNotMember answers Members on a server that was in the raft
// configuration and has been removed from it (it keeps running, as a
// removed ZooKeeper server does). A server not yet added, or not yet told
// it was, answers with what it knows.
var errNotMember = status.Error(codes.FailedPrecondition,
	"server: this server was removed from the cluster's configuration; ask a member")

// Members lists raft's configuration as this server has it: every voter
// and non-voter (observer), who leads, and whether each is alive. Alive is
// one test made from the answering server: the server itself is alive, and
// another is alive if it answers this server's Status call on the peer
// plane within RaftTimeout (the calls go out together). So every server of
// a healthy cluster, all reaching all, answers alike, with gossip or
// without; a server cut off from some members says so of those. A server
// removed from the configuration answers errNotMember rather than a
// membership it is no part of.
func (a *adminService) Members(ctx context.Context, _ *api.MembersRequest) (*api.MembersResponse, error) {
	s := a.s
	servers, err := s.rep.Configuration()
	if err != nil {
		return nil, err
	}
	if s.removed.Load() && !slices.ContainsFunc(servers, func(m replica.Member) bool { return m.ID == s.cfg.ID }) {
		return nil, errNotMember
	}
	// A member whose gRPC address this server does not know (added by its
	// raft address alone): ask the members, at most once a second.
	s.mu.Lock()
	missing := false
	for _, srv := range servers {
		if srv.ID != s.cfg.ID && s.members[srv.ID].GRPCAddr == "" {
			missing = true
		}
	}
	s.mu.Unlock()
	if missing && !a.peer && s.membersDiscovered.Load()+int64(time.Second) < time.Now().UnixNano() {
		s.membersDiscovered.Store(time.Now().UnixNano())
		dctx, cancel := context.WithTimeout(ctx, 2*s.cfg.RaftTimeout)
		s.discover(dctx)
		cancel()
	}
	_, leaderID := s.rep.LeaderWithID()
	known := map[string]Member{}
	s.mu.Lock()
	for id, m := range s.members {
		known[id] = m
	}
	s.mu.Unlock()
	alive := s.probeMembers(ctx, servers)
	resp := &api.MembersResponse{}
	for i, srv := range servers {
		m := known[srv.ID]
		role := "voter"
		if !srv.Voter {
			role = "observer"
		}
		resp.Members = append(resp.Members, &api.Member{Id: srv.ID, RaftAddr: srv.Addr,
			GrpcAddr: m.GRPCAddr, ZkAddr: m.ZKAddr, Role: role, Leader: srv.ID == leaderID, Alive: alive[i]})
	}
	return resp, nil
}

// probeMembers tells which of servers are alive as Members defines it:
// this server, and those that answer its Status call on the peer plane
// within RaftTimeout.
func (s *Server) probeMembers(ctx context.Context, servers []replica.Member) []bool {
	alive := make([]bool, len(servers))
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RaftTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, srv := range servers {
		if srv.ID == s.cfg.ID {
			alive[i] = true
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc, err := s.rep.PeerConn(srv.Addr)
			if err != nil {
				return
			}
			st, err := api.NewAdminClient(cc).Status(ctx, &api.StatusRequest{})
			alive[i] = err == nil && st.Id == srv.ID
		}()
	}
	wg.Wait()
	return alive
}

// errNotLeader tells an operator to ask the leader.
var errNotLeader = errors.New("server: not the leader; ask the leader")

func (a *adminService) AddServer(ctx context.Context, req *api.AddServerRequest) (*api.AddServerResponse, error) {
	if err := a.authorize(ctx, "AddServer"); err != nil {
		return nil, err
	}
	s := a.s
	if !s.rep.IsLeader() {
		return nil, errNotLeader
	}
	if req.Id == "" || req.RaftAddr == "" {
		return nil, errors.New("server: AddServer needs an id and a raft address")
	}
	add := s.rep.AddVoter
	if req.Observer {
		add = s.rep.AddNonvoter
	}
	// The role first: a non-voter added as an observer must not look,
	// for a moment, like a voter catching up (reconcileMembers would
	// promote it).
	s.setRole(req.Id, req.RaftAddr, req.Observer)
	s.mu.Lock()
	delete(s.removedAt, req.Id) // an operator adds it back: its joins count again
	s.mu.Unlock()
	if err := add(req.Id, req.RaftAddr, s.leaderWait()); err != nil {
		return nil, err
	}
	return &api.AddServerResponse{}, nil
}

func (a *adminService) RemoveServer(ctx context.Context, req *api.RemoveServerRequest) (*api.RemoveServerResponse, error) {
	if err := a.authorize(ctx, "RemoveServer"); err != nil {
		return nil, err
	}
	s := a.s
	if !s.rep.IsLeader() {
		return nil, errNotLeader
	}
	idx, err := s.rep.RemoveServer(req.Id, s.leaderWait())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	delete(s.members, req.Id)
	s.removedAt[req.Id] = idx
	s.mu.Unlock()
	return &api.RemoveServerResponse{}, nil
}

func (a *adminService) TransferLeadership(ctx context.Context, req *api.TransferLeadershipRequest) (*api.TransferLeadershipResponse, error) {
	if err := a.authorize(ctx, "TransferLeadership"); err != nil {
		return nil, err
	}
	s := a.s
	if !s.rep.IsLeader() {
		return nil, errNotLeader
	}
	if err := s.rep.TransferLeadership(ctx, req.Id); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.leaderWait())
	for time.Now().Before(deadline) {
		if _, id := s.rep.LeaderWithID(); id != "" && id != s.cfg.ID {
			return &api.TransferLeadershipResponse{LeaderId: id}, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, id := s.rep.LeaderWithID()
	return &api.TransferLeadershipResponse{LeaderId: id}, nil
}

func (a *adminService) Snapshot(ctx context.Context, _ *api.SnapshotRequest) (*api.SnapshotResponse, error) {
	if err := a.authorize(ctx, "Snapshot"); err != nil {
		return nil, err
	}
	index, err := a.s.rep.TakeSnapshot()
	if err != nil {
		return nil, err
	}
	return &api.SnapshotResponse{Index: index}, nil
}

// Sessions lists the session table, marking the sessions connected here.
func (a *adminService) Sessions(ctx context.Context, _ *api.SessionsRequest) (*api.SessionsResponse, error) {
	if err := a.authorize(ctx, "Sessions"); err != nil {
		return nil, err
	}
	here := map[int64]bool{}
	for _, c := range a.s.sess.Conns() {
		here[c.ID()] = true
	}
	watches := a.s.sess.Watches()
	resp := &api.SessionsResponse{}
	for _, info := range a.s.rep.View().Sessions() {
		si := &api.SessionInfo{Id: info.ID, TimeoutMs: info.Timeout, Owner: info.Owner,
			Ephemerals: int64(info.Ephemerals), ConnectedHere: here[info.ID]}
		if si.ConnectedHere {
			// Watches are server-local: only this server knows them.
			si.Watches = int64(watches.SessionCount(info.ID))
		}
		resp.Sessions = append(resp.Sessions, si)
	}
	return resp, nil
}

// Samples answers this server's recent samples of its own metrics, oldest
// first (samples.go). It is open to anyone, as Status is: the same numbers
// are on /metrics.
func (a *adminService) Samples(context.Context, *api.SamplesRequest) (*api.SamplesResponse, error) {
	sm := a.s.samples
	return &api.SamplesResponse{Id: a.s.cfg.ID, IntervalMs: sm.interval.Milliseconds(), Samples: sm.list()}, nil
}

// KillSession closes a session through the log, as its expiry does.
func (a *adminService) KillSession(ctx context.Context, req *api.KillSessionRequest) (*api.KillSessionResponse, error) {
	if err := a.authorize(ctx, "KillSession"); err != nil {
		return nil, err
	}
	if _, ok := a.s.rep.View().Session(req.Id); !ok {
		return nil, status.Errorf(codes.NotFound, "no session 0x%x", req.Id)
	}
	cmd := &fsm.Command{Type: fsm.CmdCloseSession, Session: req.Id}
	res, err := a.s.rep.Propose(ctx, cmd)
	a.s.sess.AuditServerWrite(a.who(ctx), cmd, res.Res, err)
	if err == nil {
		err = res.Res.Err
	}
	if err != nil {
		if vocab.CodeOf(err) == vocab.SessionExpired || vocab.CodeOf(err) == vocab.NoNode {
			return nil, status.Errorf(codes.NotFound, "no session 0x%x", req.Id)
		}
		return nil, status.Errorf(codes.Unavailable, "closing session 0x%x: %v", req.Id, err)
	}
	return &api.KillSessionResponse{}, nil
}

// HashKV waits until this server has applied min_index and answers the
// digest of its state with the index it is at. The view is taken under
// the apply lock (so it and the index agree) and hashed outside it. The
// digest is of the state as SaveSnapshot streams it, without the session
// passwords (fsm.View.DigestWithoutPasswords): a saved snapshot, and a
// server restored from it, hash to what HashKV answered at its index.
func (a *adminService) HashKV(ctx context.Context, req *api.HashKVRequest) (*api.HashKVResponse, error) {
	if err := a.authorize(ctx, "HashKV"); err != nil {
		return nil, err
	}
	if err := a.s.rep.WaitApplied(ctx, req.MinIndex); err != nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "waiting to apply index %d: %v", req.MinIndex, err)
	}
	var v *fsm.View
	var applied uint64
	a.s.rep.Read(func(view *fsm.View) { v, applied = view, a.s.rep.Applied() })
	d := v.DigestWithoutPasswords()
	return &api.HashKVResponse{Id: a.s.cfg.ID, AppliedIndex: applied, LastZxid: int64(v.LastZxid()), Digest: d[:]}, nil
}

// SaveSnapshot streams this server's state in the format of its raft
// snapshots (a uvarint applied index, then the state machine's stream),
// with every session's password left out: no session password leaves a
// server. A server restored from it has the sessions, but no client can
// re-attach to them; they expire.
func (a *adminService) SaveSnapshot(_ *api.SaveSnapshotRequest, stream api.Admin_SaveSnapshotServer) error {
	if err := a.authorize(stream.Context(), "SaveSnapshot"); err != nil {
		return err
	}
	var v *fsm.View
	var applied uint64
	a.s.rep.Read(func(view *fsm.View) { v, applied = view, a.s.rep.Applied() })
	w := bufio.NewWriterSize(&chunkWriter{stream: stream}, 1<<20)
	if _, err := w.Write(binary.AppendUvarint(nil, applied)); err != nil {
		return err
	}
	if _, err := v.WriteToWithoutPasswords(w); err != nil {
		return err
	}
	return w.Flush()
}

// chunkWriter sends what it is given as snapshot chunks.
type chunkWriter struct{ stream api.Admin_SaveSnapshotServer }

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), 1<<20)]
		if err := c.stream.Send(&api.SnapshotChunk{Data: chunk}); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}
