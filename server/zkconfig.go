package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"coord/fsm"
)

// /zookeeper/config shows the cluster's membership in ZooKeeper's dynamic
// configuration format, so that zkCli.sh's config, getConfig and the
// clients that parse it (Curator's EnsembleTracker) see a ZooKeeper
// ensemble:
//
//	server.1=127.0.0.1:7000:7001:participant;127.0.0.1:2181
//	version=100000004
//
// One line per server in raft's configuration: host:quorumPort is its raft
// address, electionPort its gRPC port (coord has no election port; the
// gRPC port is what a reconfig needs to reach the server), the role
// participant for a voter and observer for a non-voter, and after the ';'
// its ZooKeeper client address (left out while unknown). version is the
// zxid of the entry that wrote the text.
//
// ZooKeeper's server ids are numbers; coord's are strings. The number of a
// server is stable: it keeps the number its raft address has in the current
// text; a server new to the text takes the number at the end of its id
// ("3", "s3", "coord-3" → 3) unless another server holds it, else the
// lowest free number. Give servers numeric ids (or ids ending in distinct
// numbers) and the numbers are the ids.
//
// The leader keeps the text in step with raft's configuration
// (reconcileConfig, every half tick): it renders the text from raft's
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

// parseServerLine parses "server.N=host:port:port[:role][;[host:]port]",
// ZooKeeper's QuorumServer syntax (the key may also be given apart).
func parseServerLine(s string) (configLine, error) {
	var l configLine
	key, value, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || !strings.HasPrefix(key, "server.") {
		return l, fmt.Errorf("%q: want server.N=host:quorumPort:electionPort[:role][;[clientHost:]clientPort]", s)
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(key, "server."), 10, 64)
	if err != nil || n < 0 {
		return l, fmt.Errorf("%q: bad server id", key)
	}
	l.N = n
	addr, client, _ := strings.Cut(value, ";")
	parts := strings.Split(addr, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] == "" {
		return l, fmt.Errorf("%q: want host:quorumPort:electionPort[:role]", value)
	}
	for _, p := range parts[1:3] {
		if v, err := strconv.Atoi(p); err != nil || v <= 0 || v > 65535 {
			return l, fmt.Errorf("%q: bad port %q", value, p)
		}
	}
	l.RaftAddr, l.GRPCPort = net.JoinHostPort(parts[0], parts[1]), parts[2]
	if len(parts) == 4 {
		switch strings.ToLower(parts[3]) {
		case "participant":
		case "observer":
			l.Observer = true
		default:
			return l, fmt.Errorf("%q: role %q: want participant or observer", value, parts[3])
		}
	}
	if client = strings.TrimSpace(client); client != "" {
		if !strings.Contains(client, ":") {
			client = "0.0.0.0:" + client
		}
		host, port, err := net.SplitHostPort(client)
		if v, perr := strconv.Atoi(port); err != nil || perr != nil || v <= 0 || v > 65535 {
			return l, fmt.Errorf("%q: bad client address", client)
		}
		l.Client = net.JoinHostPort(host, port)
	}
	return l, nil
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
func (s *Server) renderConfig(servers []raft.Server, current string) (string, bool) {
	byAddr := map[string]configLine{}
	for _, l := range parseConfigText(current) {
		byAddr[l.RaftAddr] = l
	}
	s.mu.Lock()
	known := map[string]Member{}
	for id, m := range s.members {
		known[id] = m
	}
	s.mu.Unlock()
	lines := make([]configLine, len(servers))
	used := map[int64]bool{}
	for i, srv := range servers {
		m := known[string(srv.ID)]
		old, inText := byAddr[string(srv.Address)]
		_, grpcPort, _ := net.SplitHostPort(m.GRPCAddr)
		if grpcPort == "" || grpcPort == "0" {
			grpcPort = old.GRPCPort // a reconfig wrote what the server is
		}
		if grpcPort == "" {
			_, grpcPort, _ = net.SplitHostPort(string(srv.Address))
		}
		client := m.ZKAddr
		if client == "" {
			client = old.Client
		}
		lines[i] = configLine{RaftAddr: string(srv.Address), GRPCPort: grpcPort, Observer: srv.Suffrage != raft.Voter, Client: client}
		if inText && !used[old.N] {
			lines[i].N, used[old.N] = old.N, true
		}
	}
	for i, srv := range servers {
		if lines[i].N != 0 {
			continue
		}
		if n := trailingNumber(string(srv.ID)); n != 0 && !used[n] {
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

// currentConfig is this server's /zookeeper/config: its lines (without
// the version line) and its version.
func (s *Server) currentConfig() (string, int64) {
	data, st, err := s.rep.View().GetData("/zookeeper/config", []fsm.Id{{Scheme: "super"}})
	if err != nil {
		return "", 0
	}
	return string(fsm.ConfigLines(data)), fsm.ConfigVersion(st)
}

// reconcileConfig (leader) proposes /zookeeper/config's text anew if raft's
// configuration no longer matches it. One runs at a time.
func (s *Server) reconcileConfig() {
	if !s.configBusy.CompareAndSwap(false, true) {
		return
	}
	defer s.configBusy.Store(false)
	if s.raft.State() != raft.Leader {
		return
	}
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	current, version := s.currentConfig()
	want, complete := s.renderConfig(servers, current)
	if !complete && time.Since(s.lastConfigDiscover) > time.Second {
		// Ask the others for the client addresses this server lacks.
		s.lastConfigDiscover = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RaftTimeout)
		s.discover(ctx)
		cancel()
		want, _ = s.renderConfig(servers, current)
	}
	if want == current {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.leaderWait())
	defer cancel()
	res, err := s.rep.Propose(ctx, &fsm.Command{Type: fsm.CmdSetConfig,
		Op: fsm.Op{Type: fsm.CmdSetConfig, Path: "/zookeeper/config", Data: []byte(want), TTL: version}})
	if err == nil {
		err = res.Res.Err
	}
	if err != nil {
		s.log.Debug("updating /zookeeper/config", "err", err)
		return
	}
	s.log.Info("membership written to /zookeeper/config", "zxid", fmt.Sprintf("0x%x", int64(res.Res.Zxid)))
}
