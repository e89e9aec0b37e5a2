package reconfig

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"coord/api"
	"coord/fsm"
	"coord/server/replica"
	"coord/server/sessions"
	"coord/vocab"
)

// ZooKeeper's reconfig (op 16) mapped onto raft's membership changes.
//
// The checks come in ZooKeeper 3.8's order (PrepRequestProcessor; each
// observed on Apache ZooKeeper 3.8.0, zk/compat's TestReconfigRules):
// reconfig disabled (Config.DisableReconfig) → ReconfigDisabled; another
// reconfig running on this server → ReconfigInProgress; fromConfig not the
// current version → BadVersion; a malformed server line, leaving id or new
// membership → BadArguments or MarshallingError (argError); no quorum of
// the new membership among the servers that are members now and answer →
// NewConfigNoQuorum; and last the caller's identities without WRITE on
// /zookeeper/config's ACL (the superuser passes) → NoAuth. A caller that
// fails the last check has had nothing dialled, resolved or asked on its
// behalf: the quorum check asks only servers in raft's configuration, at
// the addresses this server knows for them, never an address the request
// names.
//
// The quorum is ZooKeeper's isQuorumSynced: the participants of the new
// membership that are connected to the cluster now must be a majority of
// its participants. A server not in raft's configuration is not connected
// (a coord server started with -peers or -join is in it, as a non-voter,
// until promoted); so adding an observer that is not running yet, or a
// participant while the running participants stay a majority, is
// accepted, as ZooKeeper accepts it, and the server joins when it starts.
//
// Then, through the leader's Admin service, each server that leaves is
// removed (RemoveServer) and each that joins (or changes role) is added as
// a voter (participant) or non-voter (observer) and told to the leader
// (Join) with its addresses. A joining server that answers where its
// line says it is (askID) is added under the id it reports; one that does
// not, under the id of a server this one knows at that raft address, else
// under its number ("server.4" → id "4"): start it with that -id (and
// -observer for an observer). The steps are ordered so that each
// intermediate raft configuration keeps a quorum of running voters:
// running servers join first, then servers leave (those that do not answer
// first), then the others join. Last the target membership is written to
// /zookeeper/config (numbered as the request numbered it), and the reply is
// that node's data and Stat, as ZooKeeper answers.

// Reconfig carries out one reconfig request (the session layer's hook,
// sessions.Config.Reconfig) of a session holding ids.
func (k *Keeper) Reconfig(ctx context.Context, ids []vocab.Id, a *sessions.ReconfigArgs) *sessions.Reply {
	fail := func(code vocab.Code, why string) *sessions.Reply {
		k.log.Info("reconfig refused", "code", code.String(), "why", why)
		return &sessions.Reply{Err: code}
	}
	if k.cfg.DisableReconfig {
		return fail(vocab.ReconfigDisabled, "reconfig is disabled on this server")
	}
	if !k.mu.TryLock() {
		return fail(vocab.ReconfigInProgress, "another reconfig runs on this server")
	}
	defer k.mu.Unlock()
	// Catch up with the leader: the version and membership checked are
	// then the current ones.
	idx, err := k.rep.SyncIndex(ctx)
	if err == nil {
		err = k.rep.WaitApplied(ctx, idx)
	}
	if err != nil {
		return fail(vocab.ConnectionLoss, err.Error())
	}
	current, version := k.currentConfig()
	if a.FromConfig != -1 && a.FromConfig != version {
		return fail(vocab.BadVersion, fmt.Sprintf("fromConfig %x, config version %x", a.FromConfig, version))
	}
	cur := parseConfigText(current)
	// Parsing only: no name is resolved, nothing is dialled.
	target, err := reconfigTarget(cur, a)
	var late *argError
	if ae := (*argError)(nil); errors.As(err, &ae) && ae.late {
		late = ae
	} else if ae != nil {
		return fail(ae.code, ae.msg)
	} else if err != nil {
		return fail(vocab.BadArguments, err.Error())
	}

	// Who is who: raft's configuration names the members (by raft address).
	members, err := k.rep.Configuration()
	if err != nil {
		return fail(vocab.ConnectionLoss, err.Error())
	}
	byAddr := map[string]replica.Member{}
	inUse := map[string]string{} // id → raft address
	for _, m := range members {
		byAddr[m.Addr] = m
		inUse[m.ID] = m.Addr
	}
	// The quorum check asks the members that are participants of the new
	// membership; the ACL check comes before asking the others (whose
	// answers only order the steps).
	var asked, others []replica.Member
	for _, m := range members {
		if slices.ContainsFunc(target, func(l configLine) bool { return l.RaftAddr == m.Addr && !l.Observer }) {
			asked = append(asked, m)
		} else {
			others = append(others, m)
		}
	}
	live := k.liveMembers(ctx, asked, cur)
	voters, running := 0, 0
	for _, l := range target {
		if l.Observer {
			continue
		}
		voters++
		if m, ok := byAddr[l.RaftAddr]; ok && live[m.ID] {
			running++
		}
	}
	if running < voters/2+1 {
		return fail(vocab.NewConfigNoQuorum, fmt.Sprintf("%d of the new membership's %d participants are members that answer now; a quorum is %d", running, voters, voters/2+1))
	}
	acl, _, err := k.rep.View().GetACL("/zookeeper/config", []vocab.Id{{Scheme: "super"}})
	if err != nil || !fsm.CheckACL(acl, vocab.PermWrite, ids) {
		return fail(vocab.NoAuth, "no WRITE permission on /zookeeper/config")
	}
	if late != nil {
		return fail(late.code, late.msg)
	}
	maps.Copy(live, k.liveMembers(ctx, others, cur))

	// The changes. A role change from participant to observer is a removal
	// and an addition (raft's AddNonvoter does not demote); one from
	// observer to participant is an addition (AddVoter promotes).
	type change struct {
		id   string
		line configLine
		live bool
	}
	var first, last, removes []change
	inTarget := map[string]bool{}
	for _, l := range target {
		inTarget[l.RaftAddr] = true
	}
	for _, l := range target {
		if m, ok := byAddr[l.RaftAddr]; ok {
			id, voter := m.ID, m.Voter
			switch c := (change{id, l, live[id]}); {
			case voter == !l.Observer:
				continue
			case voter:
				removes = append(removes, c)
				last = append(last, c)
			case c.live:
				first = append(first, c)
			default:
				last = append(last, c)
			}
			continue
		}
		// A server new to raft's configuration: asked now, for its id,
		// on behalf of a caller allowed to change the membership.
		id, answered, err := k.joinerID(ctx, l)
		if err != nil {
			return fail(vocab.BadArguments, err.Error())
		}
		c := change{id, l, answered}
		if at, taken := inUse[id]; taken {
			if _, member := byAddr[at]; !member || inTarget[at] {
				return fail(vocab.BadArguments, fmt.Sprintf("server.%d: id %q is the id of the server at %s; start server.%d with an id of its own", l.N, id, at, l.N))
			}
			// The server that has the id now leaves: this one joins
			// after it has left.
			last = append(last, c)
		} else if answered {
			first = append(first, c)
		} else {
			last = append(last, c)
		}
		inUse[id] = l.RaftAddr
	}
	for _, m := range members {
		if !inTarget[m.Addr] {
			removes = append(removes, change{id: m.ID, live: live[m.ID]})
		}
	}
	// Servers that do not answer leave first and join last.
	slices.SortStableFunc(removes, func(a, b change) int { return cmpBool(a.live, b.live) })
	slices.SortStableFunc(last, func(a, b change) int { return cmpBool(b.live, a.live) })

	// Each step is retried until it succeeds or the request's time is up:
	// removing the leader elects another one, which the next steps ask.
	// Every step is idempotent.
	add := func(c change) *sessions.Reply {
		k.log.Info("reconfig: adding server", "id", c.id, "raft", c.line.RaftAddr, "observer", c.line.Observer, "answers", c.live)
		role := "voter"
		if c.line.Observer {
			role = "observer"
		}
		m := &api.Member{Id: c.id, RaftAddr: c.line.RaftAddr, GrpcAddr: c.line.GRPCAddr(), ZkAddr: c.line.Client, Role: role}
		k.srv.Learn(Member{ID: c.id, RaftAddr: m.RaftAddr, GRPCAddr: m.GrpcAddr, ZKAddr: m.ZkAddr, Observer: c.line.Observer})
		err := k.onLeader(ctx, func(admin api.AdminClient, internal api.InternalClient) error {
			if _, err := admin.AddServer(ctx, &api.AddServerRequest{Id: c.id, RaftAddr: c.line.RaftAddr, Observer: c.line.Observer}); err != nil {
				return err
			}
			// Teach the leader the server's addresses and role.
			_, err := internal.Join(ctx, &api.JoinRequest{Member: m})
			return err
		})
		if err != nil {
			return fail(vocab.ConnectionLoss, "adding "+c.id+": "+err.Error())
		}
		return nil
	}
	for _, c := range first {
		if r := add(c); r != nil {
			return r
		}
	}
	for _, c := range removes {
		k.log.Info("reconfig: removing server", "id", c.id, "answers", c.live)
		id := c.id
		err := k.onLeader(ctx, func(cc api.AdminClient, _ api.InternalClient) error {
			_, err := cc.RemoveServer(ctx, &api.RemoveServerRequest{Id: id})
			return err
		})
		if err != nil {
			return fail(vocab.ConnectionLoss, "removing "+c.id+": "+err.Error())
		}
	}
	for _, c := range last {
		if r := add(c); r != nil {
			return r
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
		res, err := k.rep.Propose(ctx, cmd)
		if err == nil {
			err = res.Res.Err
		}
		if err == nil {
			k.srv.Audit(sessions.AuditUsers(ids), cmd, res.Res, nil)
			break
		}
		if ctx.Err() != nil {
			k.srv.Audit(sessions.AuditUsers(ids), cmd, res.Res, err)
			return fail(vocab.ConnectionLoss, "writing /zookeeper/config: "+err.Error())
		}
		k.log.Info("reconfig: writing /zookeeper/config again", "err", err)
		time.Sleep(50 * time.Millisecond)
	}
	data, st, err := k.rep.View().GetData("/zookeeper/config", []vocab.Id{{Scheme: "super"}})
	if err != nil {
		return fail(vocab.SystemError, err.Error())
	}
	k.log.Info("reconfig done", "version", fmt.Sprintf("%x", st.Mzxid), "removed", len(removes), "added", len(first)+len(last))
	return &sessions.Reply{Body: sessions.BodyData, Data: data, Stat: st}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// liveMembers reports which of members answer now (ZooKeeper's "connected
// and synced"): this server does; each other one is asked (askID) where
// this server knows it is: its raft address, and the gRPC port it learned,
// else its line's in the current /zookeeper/config; all at once.
func (k *Keeper) liveMembers(ctx context.Context, members []replica.Member, cur []configLine) map[string]bool {
	known := k.srv.Members()
	byAddr := map[string]configLine{}
	for _, l := range cur {
		byAddr[l.RaftAddr] = l
	}
	live := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range members {
		id, addr := m.ID, m.Addr
		if id == k.cfg.ID {
			continue
		}
		l := byAddr[addr]
		l.RaftAddr = addr
		if _, port, err := net.SplitHostPort(known[id].GRPCAddr); err == nil && port != "" && port != "0" {
			l.GRPCPort = port
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := k.askID(ctx, l)
			mu.Lock()
			live[id] = err == nil && got == id
			mu.Unlock()
		}()
	}
	wg.Wait()
	live[k.cfg.ID] = true
	return live
}

// joinerID is the raft id a server new to the configuration joins under:
// the id it reports if it answers where its line says it is (askID); else
// the id of a server this one knows at that raft address; else the line's
// number. It fails only if a server answers there with another raft
// address.
func (k *Keeper) joinerID(ctx context.Context, l configLine) (id string, answered bool, err error) {
	id, err = k.askID(ctx, l)
	if err == nil {
		return id, true, nil
	}
	if errors.Is(err, errOtherRaftAddr) {
		return "", false, err
	}
	k.log.Info("reconfig: joining server does not answer; adding it all the same", "server", l.N, "err", err)
	for _, m := range k.srv.Members() {
		if m.RaftAddr == l.RaftAddr && m.ID != k.cfg.ID && (id == "" || m.ID < id) {
			id = m.ID
		}
	}
	if id == "" {
		id = strconv.FormatInt(l.N, 10)
	}
	return id, false, nil
}

// onLeader runs f on the current leader's Admin and Internal services
// until it succeeds or ctx ends.
func (k *Keeper) onLeader(ctx context.Context, f func(api.AdminClient, api.InternalClient) error) error {
	for {
		cc, err := k.leaderConn(ctx)
		if err == nil {
			if err = f(api.NewAdminClient(cc), api.NewInternalClient(cc)); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return err
		}
		k.log.Info("reconfig: asking the leader again", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reconfigTarget is the membership a reconfig asks for: NewMembers
// (comma- or newline-separated server lines and version=) if given, else
// the current lines less Leaving (comma-separated ids) and with Joining
// (comma-separated server lines, each with its client port) in place,
// sorted by id. Its errors are *argError, with ZooKeeper 3.8's codes; with
// a late one the target comes too.
func reconfigTarget(cur []configLine, a *sessions.ReconfigArgs) ([]configLine, error) {
	byN := map[int64]configLine{}
	var late error
	keep := func(err error) error { // err unless it is late (kept)
		if ae := (*argError)(nil); errors.As(err, &ae) && ae.late {
			if late == nil {
				late = err
			}
			return nil
		}
		return err
	}
	split := func(s string) []string {
		var out []string
		for _, item := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' }) {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
		return out
	}
	if strings.TrimSpace(a.NewMembers) != "" {
		for _, item := range split(a.NewMembers) {
			key, _, _ := strings.Cut(item, "=")
			switch key = strings.TrimSpace(key); {
			case key == "version":
				continue
			case !strings.HasPrefix(key, "server."):
				return nil, badArgs("unrecognised parameter %q", key)
			}
			l, err := parseServerLine(item)
			if err := keep(err); err != nil {
				return nil, err
			}
			byN[l.N] = l
		}
		if !slices.ContainsFunc(slices.Collect(maps.Values(byN)), func(l configLine) bool { return !l.Observer }) {
			// ZooKeeper: "Observers w/o participants is an invalid
			// configuration", an IllegalArgumentException.
			return nil, marshalling("the new membership has no participant")
		}
	} else {
		for _, l := range cur {
			byN[l.N] = l
		}
		for _, item := range split(a.Leaving) {
			n, err := strconv.ParseInt(item, 10, 64)
			if err != nil {
				return nil, marshalling("invalid server id: %q", item)
			}
			delete(byN, n)
		}
		for _, item := range split(a.Joining) {
			l, err := parseServerLine(item)
			if err := keep(err); err != nil {
				return nil, err
			}
			if l.Client == "" {
				return nil, badArgs("%q: each server needs its client port", item)
			}
			byN[l.N] = l
		}
		if !slices.ContainsFunc(slices.Collect(maps.Values(byN)), func(l configLine) bool { return !l.Observer }) {
			return nil, badArgs("the new membership has no participant")
		}
	}
	out := make([]configLine, 0, len(byN))
	addrs := map[string]bool{}
	for _, l := range byN {
		if addrs[l.RaftAddr] {
			keep(lateArgs("two servers at %s", l.RaftAddr))
		}
		addrs[l.RaftAddr] = true
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b configLine) int { return cmp.Compare(a.N, b.N) })
	return out, late
}

// errOtherRaftAddr: a server answers at a joining line's address but has
// another raft address.
var errOtherRaftAddr = errors.New("the server there has another raft address")

// askID asks a server that is to join, at the gRPC address its line gives,
// for its id, and checks that its raft address is the line's.
func (k *Keeper) askID(ctx context.Context, l configLine) (string, error) {
	// On the peer plane: a server that answers there holds the cluster's
	// key or a peer certificate.
	cc, err := k.rep.PeerConn(l.RaftAddr)
	if err != nil {
		return "", fmt.Errorf("server.%d at %s: %w", l.N, l.RaftAddr, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*k.cfg.RaftTimeout)
	defer cancel()
	st, err := api.NewAdminClient(cc).Status(cctx, &api.StatusRequest{})
	if err != nil {
		return "", fmt.Errorf("server.%d does not answer at %s: %w", l.N, l.RaftAddr, err)
	}
	// The server's raft address is only known to raft itself; check what
	// the server remembers of itself when it can tell.
	resp, err := api.NewAdminClient(cc).Members(cctx, &api.MembersRequest{})
	if err == nil {
		for _, m := range resp.Members {
			if m.Id == st.Id && m.RaftAddr != "" && m.RaftAddr != l.RaftAddr {
				return "", fmt.Errorf("server.%d: %s has raft address %s, not %s: %w", l.N, st.Id, m.RaftAddr, l.RaftAddr, errOtherRaftAddr)
			}
		}
	}
	return st.Id, nil
}
