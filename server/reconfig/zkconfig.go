package reconfig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"coord/fsm"
	"coord/server/replica"
	"coord/vocab"
	"coord/zk"
)

// /zookeeper/config shows the cluster's membership in ZooKeeper's dynamic
// configuration format, so that zkCli.sh's config, getConfig and the
// clients that parse it (Curator's EnsembleTracker) see a ZooKeeper
// ensemble:
//
//	server.1=127.0.0.1:2888:2182:participant;127.0.0.1:2181
//	version=100000004
//
// One line per server in raft's configuration: host:quorumPort is its raft
// address, electionPort its gRPC port (coord has no election port; the
// gRPC port is what a reconfig needs to reach the server), the role
// role, and after the ';' its ZooKeeper client address (left out while
// unknown). version is the zxid of the entry that wrote the text.
//
// The role is what the server is meant to be, as in ZooKeeper, where the
// dynamic configuration decides a server's role: a voter is a participant;
// a non-voter is an observer, or a participant still catching up with the
// log, which the leader promotes to voter once it has caught up
// (Participant). A non-voter keeps the role its line has; one new to the
// text takes the role it asked to join with or an operator added it with
// (SetRole), else observer. The text is replicated, so a new leader knows
// which non-voters to promote from it, not from its own flags.
//
// ZooKeeper's server ids are numbers; coord's are strings. The number of a
// server is stable: it keeps the number its raft address has in the current
// text; a server new to the text takes the number at the end of its id
// ("3", "s3", "coord-3" → 3) unless another server holds it, else the
// lowest free number. Give servers numeric ids (or ids ending in distinct
// numbers) and the numbers are the ids.
//
// The leader keeps the text in step with raft's configuration
// (Reconcile, every half tick): it renders the text from raft's
// configuration and the addresses it knows, and if that differs from the
// stored lines it proposes CmdSetConfig with them (fromConfig the stored
// version, so two leaders never overwrite each other's newer text). The
// text travels in the entry, so apply stays deterministic and every server
// stores the same bytes.

// configLine is one server.N line.
type configLine struct {
	N        int64
	RaftAddr string // host:quorumPort
	GRPCPort string // electionPort
	Observer bool
	Client   string // clientHost:clientPort, "" unknown
}

func (l configLine) String() string {
	role := "participant"
	if l.Observer {
		role = "observer"
	}
	host, port, _ := net.SplitHostPort(l.RaftAddr)
	s := fmt.Sprintf("server.%d=%s:%s:%s:%s", l.N, host, port, l.GRPCPort, role)
	if l.Client != "" {
		s += ";" + l.Client
	}
	return s
}

// GRPCAddr is the server's gRPC address: the raft host, the election port.
func (l configLine) GRPCAddr() string {
	host, _, _ := net.SplitHostPort(l.RaftAddr)
	return net.JoinHostPort(host, l.GRPCPort)
}

// argError is a reconfig argument refused with code. ZooKeeper 3.8
// answers its own parse errors before it checks the caller's ACL: most with
// BadArguments, a number that is no number (a server id, a leaving id, a
// port) or a membership without a participant given as new members with
// MarshallingError (Java's exceptions escape its parser). coord refuses a
// few lines more than ZooKeeper does (two servers at one raft address, a
// port 0, a server number below 1: raft and /zookeeper/config's numbering
// cannot hold them); those are late: answered only to a caller allowed to
// reconfig, so a caller without WRITE on /zookeeper/config gets NoAuth where
// ZooKeeper would too.
type argError struct {
	code vocab.Code
	msg  string
	late bool
}

func (e *argError) Error() string { return e.msg }

func badArgs(format string, a ...any) error {
	return &argError{code: vocab.BadArguments, msg: fmt.Sprintf(format, a...)}
}

func marshalling(format string, a ...any) error {
	return &argError{code: vocab.MarshallingError, msg: fmt.Sprintf(format, a...)}
}

func lateArgs(format string, a ...any) error {
	return &argError{code: vocab.BadArguments, msg: fmt.Sprintf(format, a...), late: true}
}

// parsePort parses a port as ZooKeeper's InetSocketAddress does: a number
// in [0, 65535] (MarshallingError otherwise); 0 is coord's refusal (late).
func parsePort(what, p string) (int, error) {
	v, err := strconv.Atoi(p)
	if err != nil || v < 0 || v > 65535 {
		return 0, marshalling("%s: bad port %q", what, p)
	}
	if v == 0 {
		return 0, lateArgs("%s: port 0", what)
	}
	return v, nil
}

// parseServerLine parses "server.N=host:port:port[:role][;[host:]port]",
// ZooKeeper's QuorumServer syntax (the key may also be given apart). An
// error is an *argError; a late one comes with the whole line parsed.
func parseServerLine(s string) (configLine, error) {
	var l configLine
	var late error
	// fatal returns err unless it is late, which it keeps (the first) and
	// parsing goes on.
	fatal := func(err error) error {
		if ae := (*argError)(nil); errors.As(err, &ae) && ae.late {
			if late == nil {
				late = err
			}
			return nil
		}
		return err
	}
	key, value, ok := strings.Cut(strings.TrimSpace(s), "=")
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if !ok || !strings.HasPrefix(key, "server.") {
		return l, badArgs("%q: want server.N=host:quorumPort:electionPort[:role][;[clientHost:]clientPort]", s)
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(key, "server."), 10, 64)
	if err != nil {
		return l, marshalling("%q: bad server id", key)
	}
	l.N = n
	if n < 1 {
		fatal(lateArgs("%q: server numbers start at 1", key))
	}
	addr, client, _ := strings.Cut(value, ";")
	parts := strings.Split(addr, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] == "" {
		return l, badArgs("%q: want host:quorumPort:electionPort[:role]", value)
	}
	var ports [2]int
	for i, p := range parts[1:3] {
		v, err := parsePort(value, p)
		if err := fatal(err); err != nil {
			return l, err
		}
		ports[i] = v
	}
	if ports[0] != 0 && ports[0] == ports[1] {
		return l, badArgs("%q: the quorum and election ports must differ", value)
	}
	l.RaftAddr, l.GRPCPort = net.JoinHostPort(parts[0], parts[1]), parts[2]
	if len(parts) == 4 {
		switch strings.ToLower(parts[3]) {
		case "participant":
		case "observer":
			l.Observer = true
		default:
			return l, badArgs("%q: role %q: want participant or observer", value, parts[3])
		}
	}
	if client = strings.TrimSpace(client); client != "" {
		if !strings.Contains(client, ":") {
			client = "0.0.0.0:" + client
		}
		host, port, err := net.SplitHostPort(client)
		if err != nil {
			return l, badArgs("%q: bad client address", client)
		}
		if _, err := parsePort(client, port); fatal(err) != nil {
			return l, err
		}
		l.Client = net.JoinHostPort(host, port)
	}
	return l, late
}

// parseConfigText reads the server lines of /zookeeper/config's text
// (other lines, version= among them, are skipped).
func parseConfigText(text string) []configLine {
	var out []configLine
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "server.") {
			continue
		}
		if l, err := parseServerLine(line); err == nil {
			out = append(out, l)
		}
	}
	return out
}

// trailingNumber is the number an id ends with (0: none).
func trailingNumber(id string) int64 {
	i := len(id)
	for i > 0 && id[i-1] >= '0' && id[i-1] <= '9' {
		i--
	}
	n, err := strconv.ParseInt(id[i:], 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// renderConfig is the text /zookeeper/config should hold (without its
// version line) for raft's servers, numbered as the current text numbers
// them. It reports whether it knew every server's client address.
func (k *Keeper) renderConfig(servers []replica.Member, current string, version int64) (string, bool) {
	byAddr := map[string]configLine{}
	for _, l := range parseConfigText(current) {
		byAddr[l.RaftAddr] = l
	}
	known := k.srv.Members()
	lines := make([]configLine, len(servers))
	used := map[int64]bool{}
	for i, srv := range servers {
		m, isKnown := known[srv.ID]
		old, inText := byAddr[srv.Addr]
		_, grpcPort, _ := net.SplitHostPort(m.GRPCAddr)
		if grpcPort == "" || grpcPort == "0" {
			grpcPort = old.GRPCPort // a reconfig wrote what the server is
		}
		if grpcPort == "" {
			_, grpcPort, _ = net.SplitHostPort(srv.Addr)
		}
		client := m.ZKAddr
		if client == "" {
			client = old.Client
		}
		lines[i] = configLine{RaftAddr: srv.Addr, GRPCPort: grpcPort, Observer: k.observer(srv, old, inText, version, m, isKnown), Client: client}
		if inText && !used[old.N] {
			lines[i].N, used[old.N] = old.N, true
		}
	}
	for i, srv := range servers {
		if lines[i].N != 0 {
			continue
		}
		if n := trailingNumber(srv.ID); n != 0 && !used[n] {
			lines[i].N, used[n] = n, true
		}
	}
	complete := true
	for i := range lines {
		if lines[i].N == 0 {
			n := int64(1)
			for used[n] {
				n++
			}
			lines[i].N, used[n] = n, true
		}
		complete = complete && lines[i].Client != ""
	}
	slices.SortFunc(lines, func(a, b configLine) int { return int(a.N - b.N) })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	return b.String(), complete
}

// observer is the role the text gives srv (see above): old is its line in
// the current text (inText), version the text's version, m what this
// server knows of it (known: anything).
func (k *Keeper) observer(srv replica.Member, old configLine, inText bool, version int64, m Member, known bool) bool {
	if srv.Voter {
		return false
	}
	k.rolesMu.Lock()
	set, ok := k.roles[srv.Addr]
	k.rolesMu.Unlock()
	switch {
	case ok && set.at == version:
		return set.observer
	case inText:
		return old.Observer
	case known:
		return m.Observer
	}
	return true
}

// SetRole (leader) records the role an operator gives the server at
// raftAddr, before raft's configuration changes: the next text written
// shows it, even for a server the text lists with another role. It lasts
// until the text changes (by this server's Reconcile, which writes it, or
// by a reconfig, which decides the roles itself).
func (k *Keeper) SetRole(raftAddr string, observer bool) {
	_, version := k.currentConfig()
	k.rolesMu.Lock()
	defer k.rolesMu.Unlock()
	if k.roles == nil {
		k.roles = map[string]roleSet{}
	}
	for addr, set := range k.roles {
		if set.at != version {
			delete(k.roles, addr)
		}
	}
	k.roles[raftAddr] = roleSet{observer: observer, at: version}
}

// Participant (leader) reports whether the server id, a member of raft's
// configuration, is meant to be a voter: a non-voter that is a participant
// by the rules above is one still catching up, to promote once it has.
func (k *Keeper) Participant(id string) bool {
	servers, err := k.rep.Configuration()
	if err != nil {
		return false
	}
	current, version := k.currentConfig()
	for _, srv := range servers {
		if srv.ID != id {
			continue
		}
		m, known := k.srv.Members()[id]
		for _, l := range parseConfigText(current) {
			if l.RaftAddr == srv.Addr {
				return !k.observer(srv, l, true, version, m, known)
			}
		}
		return !k.observer(srv, configLine{}, false, version, m, known)
	}
	return false
}

// currentConfig is this server's /zookeeper/config: its lines (without
// the version line) and its version.
func (k *Keeper) currentConfig() (string, int64) {
	data, st, err := k.rep.View().GetData("/zookeeper/config", []vocab.Id{{Scheme: "super"}})
	if err != nil {
		return "", 0
	}
	return string(fsm.ConfigLines(data)), fsm.ConfigVersion(st)
}

// Quorum is the quorum part of the four-letter word conf, which
// follows /zookeeper/config: serverID is this server's number there (else
// the number its id ends with), quorumPort its raft port and electionPort
// its gRPC port, as in its server line. initLimit and syncLimit (ticks a
// ZooKeeper follower may take to sync with and to keep up with its leader)
// have no counterpart in raft and are -1; electionAlg is 3, the only
// election ZooKeeper 3.8 has.
func (k *Keeper) Quorum() (serverID int64, q *zk.QuorumConf) {
	text, version := k.currentConfig()
	lines := parseConfigText(text)
	raftAddr, voter := k.rep.Addr(), !k.cfg.Observer
	if servers, err := k.rep.Configuration(); err == nil {
		for _, srv := range servers {
			if srv.ID == k.cfg.ID {
				raftAddr, voter = srv.Addr, srv.Voter
			}
		}
	}
	_, quorumPort, _ := net.SplitHostPort(raftAddr)
	_, electionPort, _ := net.SplitHostPort(k.cfg.GRPCAddr)
	serverID = trailingNumber(k.cfg.ID)
	for _, l := range lines {
		if l.RaftAddr == raftAddr {
			serverID, electionPort = l.N, l.GRPCPort
		}
	}
	q = &zk.QuorumConf{InitLimit: -1, SyncLimit: -1, ElectionAlg: 3, ElectionPort: electionPort,
		QuorumPort: quorumPort, Members: []zk.QuorumMember{}, ConfigVersion: version}
	if !voter {
		q.PeerType = 1
	}
	for _, l := range lines {
		host, qp, _ := net.SplitHostPort(l.RaftAddr)
		qport, _ := strconv.Atoi(qp)
		eport, _ := strconv.Atoi(l.GRPCPort)
		q.Members = append(q.Members, zk.QuorumMember{ID: l.N, Host: host, QuorumPort: qport, ElectionPort: eport,
			Observer: l.Observer, ClientAddr: l.Client})
	}
	return serverID, q
}

// Reconcile (leader) proposes /zookeeper/config's text anew if raft's
// configuration no longer matches it. One runs at a time.
func (k *Keeper) Reconcile() {
	if !k.busy.CompareAndSwap(false, true) {
		return
	}
	defer k.busy.Store(false)
	if !k.rep.Settled() {
		return
	}
	servers, err := k.rep.Configuration()
	if err != nil {
		return
	}
	current, version := k.currentConfig()
	want, complete := k.renderConfig(servers, current, version)
	if !complete && time.Since(k.lastDiscover) > time.Second {
		// Ask the others for the client addresses this server lacks.
		k.lastDiscover = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), k.cfg.RaftTimeout)
		k.srv.Discover(ctx)
		cancel()
		want, _ = k.renderConfig(servers, current, version)
	}
	if want == current {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.rep.LeaderWait())
	defer cancel()
	cmd := &fsm.Command{Type: fsm.CmdSetConfig,
		Op: fsm.Op{Type: fsm.CmdSetConfig, Path: "/zookeeper/config", Data: []byte(want), TTL: version}}
	res, err := k.rep.Propose(ctx, cmd)
	if err == nil {
		err = res.Res.Err
	}
	if err != nil {
		k.log.Debug("updating /zookeeper/config", "err", err)
		return
	}
	k.srv.Audit("", cmd, res.Res, nil)
	k.log.Info("membership written to /zookeeper/config", "zxid", fmt.Sprintf("0x%x", int64(res.Res.Zxid)))
}
