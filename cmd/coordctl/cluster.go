package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"coord/api"
	"coord/internal/fourletter"
)

func clusterCommands(g *globals) []*cobra.Command {
	return []*cobra.Command{statusCommand(g), membersCommand(g), leaderCommand(g),
		addServerCommand(g, false), addServerCommand(g, true), promoteCommand(g), removeCommand(g),
		moveLeaderCommand(g), endpointCommand(g), snapshotCommand(g), sessionsCommand(g), checkCommand(g), fourLetterCommand(g)}
}

// leaderOf is the leader's status among all, or nil.
func leaderOf(all []memberStatus) *api.StatusResponse {
	for _, s := range all {
		if s.st != nil && s.st.Role == "leader" {
			return s.st
		}
	}
	return nil
}

// memberStatus is one member's answer to Status, or why there is none.
type memberStatus struct {
	member *api.Member
	st     *api.StatusResponse
	took   time.Duration
	err    error
}

// statusAll asks every member for its status, concurrently.
func (g *globals) statusAll(ctx context.Context) ([]memberStatus, error) {
	ms, _, err := g.members(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]memberStatus, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		out[i].member = m
		if m.GrpcAddr == "" {
			out[i].err = errors.New("gRPC address unknown")
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			out[i].st, out[i].err = g.statusOf(ctx, m.GrpcAddr)
			out[i].took = time.Since(start)
		}()
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b memberStatus) int { return strings.Compare(a.member.Id, b.member.Id) })
	return out, nil
}

type statusJSON struct {
	ID           string `json:"id"`
	Endpoint     string `json:"endpoint"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	LastZxid     string `json:"last_zxid"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Lag          uint64 `json:"lag"`
	Sessions     int64  `json:"sessions"`
	Watches      int64  `json:"watches"`
	Znodes       int64  `json:"znodes"`
	DBBytes      int64  `json:"db_bytes"`
	Uptime       string `json:"uptime"`
	Error        string `json:"error,omitempty"`
}

func statusCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show every member: role, leader, zxid, applied index, lag, sessions, watches, znodes, db size, uptime",
		Long: `Ask every member of the cluster for its status. Lag is how many raft entries the
member has still to apply of what the leader has committed.`,
		Example: "  coordctl status\n  coordctl status -o table\n  coordctl status -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			all, err := g.statusAll(ctx)
			if err != nil {
				return err
			}
			var commit uint64
			if l := leaderOf(all); l != nil {
				commit = l.CommitIndex
			}
			var js []statusJSON
			for _, s := range all {
				j := statusJSON{ID: s.member.Id, Endpoint: s.member.GrpcAddr, Role: s.member.Role}
				if s.err != nil {
					j.Error = oneLine(s.err.Error())
				} else {
					st := s.st
					j.Role, j.Leader, j.Term = st.Role, st.LeaderId, st.Term
					j.LastZxid = fmt.Sprintf("0x%x", st.LastZxid)
					j.CommitIndex, j.AppliedIndex = st.CommitIndex, st.AppliedIndex
					if commit > st.AppliedIndex {
						j.Lag = commit - st.AppliedIndex
					}
					j.Sessions, j.Watches, j.Znodes = st.Sessions, st.Watches, st.Znodes
					j.DBBytes, j.Uptime = st.DbBytes, (time.Duration(st.UptimeMs) * time.Millisecond).Round(time.Second).String()
				}
				js = append(js, j)
			}
			rows := func() ([]string, [][]string) {
				var rows [][]string
				for _, j := range js {
					if j.Error != "" {
						rows = append(rows, []string{j.ID, j.Endpoint, j.Role, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", j.Error})
						continue
					}
					rows = append(rows, []string{j.ID, j.Endpoint, j.Role, j.Leader, fmt.Sprint(j.Term), j.LastZxid,
						fmt.Sprint(j.AppliedIndex), fmt.Sprint(j.Lag), fmt.Sprint(j.Sessions), fmt.Sprint(j.Watches), fmt.Sprint(j.Znodes),
						humanBytes(j.DBBytes), j.Uptime, ""})
				}
				return []string{"ID", "ENDPOINT", "ROLE", "LEADER", "TERM", "LAST ZXID", "APPLIED", "LAG", "SESSIONS", "WATCHES", "ZNODES", "DB SIZE", "UPTIME", "ERROR"}, rows
			}
			return g.show(view{json: js, rows: rows, text: func(w io.Writer) {
				head, r := rows()
				writeTable(w, head, r)
			}})
		},
	}
}

type memberJSON struct {
	ID       string `json:"id"`
	Role     string `json:"role"`
	Leader   bool   `json:"leader"`
	Alive    bool   `json:"alive"`
	RaftAddr string `json:"raft_addr"`
	GRPCAddr string `json:"grpc_addr"`
}

func membersCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "members",
		Short:   "List the raft configuration: voters and observers, and who leads",
		Example: "  coordctl members\n  coordctl members -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			ms, _, err := g.members(ctx)
			if err != nil {
				return err
			}
			var js []memberJSON
			for _, m := range ms {
				js = append(js, memberJSON{m.Id, m.Role, m.Leader, m.Alive, m.RaftAddr, m.GrpcAddr})
			}
			slices.SortFunc(js, func(a, b memberJSON) int { return strings.Compare(a.ID, b.ID) })
			rows := func() ([]string, [][]string) {
				var rows [][]string
				for _, m := range js {
					rows = append(rows, []string{m.ID, m.Role, fmt.Sprint(m.Leader), fmt.Sprint(m.Alive), m.RaftAddr, m.GRPCAddr})
				}
				return []string{"ID", "ROLE", "LEADER", "ALIVE", "RAFT", "GRPC"}, rows
			}
			return g.show(view{json: js, rows: rows, text: func(w io.Writer) {
				head, r := rows()
				writeTable(w, head, r)
			}})
		},
	}
}

func leaderCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "leader",
		Short:   "Print the leader's id and gRPC address",
		Example: "  coordctl leader\n  coordctl leader -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			ms, st, err := g.members(ctx)
			if err != nil {
				return err
			}
			if st.LeaderId == "" {
				return fmt.Errorf("server %s knows no leader", st.Id)
			}
			addr := ""
			if m, err := findMember(ms, st.LeaderId); err == nil {
				addr = m.GrpcAddr
			}
			return g.show(view{json: map[string]any{"id": st.LeaderId, "grpc_addr": addr, "term": st.Term},
				text: func(w io.Writer) { fmt.Fprintf(w, "%s %s\n", st.LeaderId, addr) }})
		},
	}
}

// onLeader runs fn on the leader's Admin service and prints done.
func (g *globals) onLeader(cmd *cobra.Command, fn func(context.Context, *admin, []*api.Member) (string, error)) error {
	ctx, cancel := g.ctx(cmd)
	defer cancel()
	a, ms, err := g.leaderAdmin(ctx)
	if err != nil {
		return err
	}
	defer a.Close()
	msg, err := fn(ctx, a, ms)
	if err != nil {
		return err
	}
	return g.show(view{json: map[string]any{"ok": true, "message": msg},
		text: func(w io.Writer) { fmt.Fprintln(w, msg) }})
}

func addServerCommand(g *globals, observer bool) *cobra.Command {
	use, short, role := "add-voter ID RAFT_ADDR", "Add a server to the cluster as a voter", "voter"
	example := "  coordctl add-voter s4 10.0.0.4:2888"
	if observer {
		use, short, role = "add-observer ID RAFT_ADDR", "Add a server to the cluster as an observer (a non-voter)", "observer"
		example = "  coordctl add-observer o1 10.0.0.9:2888"
	}
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    short + ". The server must be running (with -bootstrap=false) and reachable at RAFT_ADDR; the leader adds it to the raft configuration and starts replicating to it.",
		Example: example,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onLeader(cmd, func(ctx context.Context, a *admin, _ []*api.Member) (string, error) {
				_, err := a.AddServer(ctx, &api.AddServerRequest{Id: args[0], RaftAddr: args[1], Observer: observer})
				if err != nil {
					return "", adminErr("add server", a.addr, err)
				}
				return fmt.Sprintf("added %s (%s) as %s", args[0], args[1], role), nil
			})
		},
	}
}

func promoteCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "promote ID",
		Short:   "Make an observer a voter",
		Example: "  coordctl promote o1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onLeader(cmd, func(ctx context.Context, a *admin, ms []*api.Member) (string, error) {
				m, err := findMember(ms, args[0])
				if err != nil {
					return "", err
				}
				if m.Role == "voter" {
					return "", usageError{fmt.Errorf("%s is already a voter", m.Id)}
				}
				if _, err := a.AddServer(ctx, &api.AddServerRequest{Id: m.Id, RaftAddr: m.RaftAddr}); err != nil {
					return "", adminErr("promote", a.addr, err)
				}
				return fmt.Sprintf("promoted %s to voter", m.Id), nil
			})
		},
	}
}

func removeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "remove ID",
		Short:   "Remove a server from the cluster",
		Example: "  coordctl remove s4",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onLeader(cmd, func(ctx context.Context, a *admin, ms []*api.Member) (string, error) {
				if _, err := findMember(ms, args[0]); err != nil {
					return "", err
				}
				if _, err := a.RemoveServer(ctx, &api.RemoveServerRequest{Id: args[0]}); err != nil {
					return "", adminErr("remove server", a.addr, err)
				}
				return fmt.Sprintf("removed %s", args[0]), nil
			})
		},
	}
}

func moveLeaderCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "move-leader [ID]",
		Short:   "Hand leadership to another voter (ID, or any suitable one)",
		Example: "  coordctl move-leader\n  coordctl move-leader s2",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onLeader(cmd, func(ctx context.Context, a *admin, ms []*api.Member) (string, error) {
				id := ""
				if len(args) == 1 {
					m, err := findMember(ms, args[0])
					if err != nil {
						return "", err
					}
					if m.Role != "voter" {
						return "", usageError{fmt.Errorf("%s is an observer; only a voter can lead", m.Id)}
					}
					if m.Leader {
						return fmt.Sprintf("%s already leads", m.Id), nil
					}
					id = m.Id
				}
				r, err := a.TransferLeadership(ctx, &api.TransferLeadershipRequest{Id: id})
				if err != nil {
					return "", adminErr("move leader", a.addr, err)
				}
				return fmt.Sprintf("leader is now %s", r.LeaderId), nil
			})
		},
	}
}

func endpointCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "endpoint",
		Short: "Check the members one by one",
	}
	var cluster bool
	health := &cobra.Command{
		Use:   "health",
		Short: "Check that each member answers and knows a leader",
		Long: `Ask each member (with --cluster, every member of the raft configuration; else
each of --servers) for its status. A member is healthy when it answers within
--dial-timeout and knows a leader; one that answers while it elects a leader is
asked again for up to 5 s, as the leader commands do. Exits 10 if any member is
unhealthy.`,
		Example: "  coordctl endpoint health\n  coordctl endpoint health --cluster -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			var all []memberStatus
			if cluster {
				var err error
				if all, err = g.statusAll(ctx); err != nil {
					return err
				}
			} else {
				all = make([]memberStatus, len(g.servers))
				for i, addr := range g.servers {
					all[i].member = &api.Member{GrpcAddr: addr}
				}
			}
			var wg sync.WaitGroup
			for i := range all {
				wg.Add(1)
				go func() {
					defer wg.Done()
					g.healthOf(ctx, &all[i], !cluster)
				}()
			}
			wg.Wait()
			type hj struct {
				Endpoint string `json:"endpoint"`
				ID       string `json:"id"`
				Healthy  bool   `json:"healthy"`
				Took     string `json:"took"`
				Error    string `json:"error,omitempty"`
			}
			var js []hj
			bad := 0
			for _, s := range all {
				j := hj{Endpoint: s.member.GrpcAddr, ID: s.member.Id, Took: s.took.Round(time.Microsecond).String()}
				switch {
				case s.err != nil:
					j.Error = oneLine(s.err.Error())
				case s.st.LeaderId == "":
					j.ID, j.Error = s.st.Id, "no leader"
				default:
					j.ID, j.Healthy = s.st.Id, true
				}
				if !j.Healthy {
					bad++
				}
				js = append(js, j)
			}
			g.show(view{json: js, text: func(w io.Writer) {
				for _, j := range js {
					if j.Healthy {
						fmt.Fprintf(w, "%s (%s) is healthy: took %s\n", j.Endpoint, j.ID, j.Took)
					} else {
						fmt.Fprintf(w, "%s is unhealthy: %s\n", j.Endpoint, j.Error)
					}
				}
			}, rows: func() ([]string, [][]string) {
				var rows [][]string
				for _, j := range js {
					rows = append(rows, []string{j.Endpoint, j.ID, fmt.Sprint(j.Healthy), j.Took, j.Error})
				}
				return []string{"ENDPOINT", "ID", "HEALTHY", "TOOK", "ERROR"}, rows
			}})
			if bad > 0 {
				return checkFailed{fmt.Sprintf("%d of %s unhealthy", bad, nouns(len(js), "endpoint", "endpoints"))}
			}
			return nil
		},
	}
	health.Flags().BoolVar(&cluster, "cluster", false, "check every member of the cluster, not only --servers")
	cmd.AddCommand(health, hashKVCommand(g))
	return cmd
}

func snapshotCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Snapshots of the replicated state",
	}
	var all bool
	take := &cobra.Command{
		Use:   "take",
		Short: "Make a server write a snapshot now (--all: every member)",
		Long: `Make the first server of --servers that answers (--all: every member) write a
raft snapshot of its state now, and print the raft index it covers.`,
		Example: "  coordctl snapshot take\n  coordctl snapshot take --all -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			var addrs []string
			if all {
				ms, _, err := g.members(ctx)
				if err != nil {
					return err
				}
				for _, m := range ms {
					addrs = append(addrs, m.GrpcAddr)
				}
			} else {
				a, _, err := g.anyAdmin(ctx)
				if err != nil {
					return err
				}
				a.Close()
				addrs = []string{a.addr}
			}
			type sj struct {
				Endpoint string `json:"endpoint"`
				Index    uint64 `json:"index"`
			}
			var js []sj
			for _, addr := range addrs {
				a, err := g.dialAdmin(addr)
				if err != nil {
					return err
				}
				r, err := a.Snapshot(ctx, &api.SnapshotRequest{})
				a.Close()
				if err != nil {
					return adminErr("snapshot", addr, err)
				}
				js = append(js, sj{addr, r.Index})
			}
			return g.show(view{json: js, text: func(w io.Writer) {
				for _, s := range js {
					fmt.Fprintf(w, "%s: snapshot at index %d\n", s.Endpoint, s.Index)
				}
			}})
		},
	}
	take.Flags().BoolVar(&all, "all", false, "on every member")
	cmd.AddCommand(take, snapshotSaveCommand(g), snapshotRestoreCommand(g))
	return cmd
}

func fourLetterCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "4lw WORD",
		Short: "Send a ZooKeeper four-letter word (mntr, ruok, srvr, stat, conf, ...) to --zk-servers",
		Long: `Send a four-letter word to each ZooKeeper-protocol address in --zk-servers
($COORD_ZK_SERVERS, "zk_servers" in the config file; default 127.0.0.1:2181)
and print the answers. With -o json, mntr's answer is an object of its keys.`,
		Example: "  coordctl 4lw ruok\n  coordctl --zk-servers 127.0.0.1:2181 4lw mntr -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			word := args[0]
			if len(word) != 4 {
				return usageError{fmt.Errorf("%q is not a four-letter word", word)}
			}
			ctx, cancel := g.ctx(cmd)
			defer cancel()
			type answer struct {
				Server string            `json:"server"`
				Output string            `json:"output,omitempty"`
				Values map[string]string `json:"values,omitempty"`
				Error  string            `json:"error,omitempty"`
				text   string            // what the server said, for text output
			}
			var out []answer
			failed := 0
			for _, addr := range g.zkServers {
				text, err := fourLetter(ctx, addr, word, g.dialTimeout, g.tlsConf)
				a := answer{Server: addr, Output: text, text: text}
				if err != nil {
					a.Error = oneLine(err.Error())
					failed++
				} else if word == "mntr" {
					// As JSON, mntr's keys as an object; an answer with no
					// keys (a server whose whitelist leaves mntr out) stays
					// the server's text.
					values := map[string]string{}
					for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
						if k, v, ok := strings.Cut(line, "\t"); ok {
							values[k] = v
						}
					}
					if len(values) > 0 {
						a.Values, a.Output = values, ""
					}
				}
				out = append(out, a)
			}
			if failed == len(out) {
				return unreachableError{servers: g.zkServers, err: errors.New(out[0].Error)}
			}
			return g.show(view{json: out, text: func(w io.Writer) {
				for _, a := range out {
					if len(out) > 1 {
						fmt.Fprintf(w, "== %s ==\n", a.Server)
					}
					if a.Error != "" {
						fmt.Fprintf(w, "error: %s\n", a.Error)
						continue
					}
					io.WriteString(w, a.text)
					if a.text != "" && !strings.HasSuffix(a.text, "\n") {
						fmt.Fprintln(w)
					}
				}
			}})
		},
	}
}

// fourLetter sends word to a ZooKeeper-protocol server and reads its whole
// answer (the server closes the connection after it), over TLS when
// coordctl's TLS flags are given (a server's -tls-only or -secure-zk-addr
// port): fourletter.Ask with --dial-timeout for the dial and 5 s more for
// the answer. A connection closed without a byte is an error, not an empty
// answer: that is how a TLS-only port refuses plaintext.
func fourLetter(ctx context.Context, addr, word string, timeout time.Duration, tlsConf *tls.Config) (string, error) {
	out, err := fourletter.Ask(ctx, addr, word, fourletter.Options{DialTimeout: timeout, Timeout: timeout + 5*time.Second, TLS: tlsConf})
	if out == "" {
		if err == nil || errors.Is(err, io.EOF) {
			if tlsConf == nil {
				return "", errors.New("the server closed the connection without an answer: it may take TLS only (-tls-only): pass --tls or --cacert")
			}
			return "", errors.New("the server closed the connection without an answer")
		}
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() && tlsConf == nil {
			return "", fmt.Errorf("%w: no answer; a TLS-only port (-secure-zk-addr) waits for a TLS handshake: pass --tls or --cacert", err)
		}
		return "", err
	}
	return out, nil
}

// humanBytes is n in B, kB, MB or GB (powers of 1000).
func humanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// healthOf fills s with its member's status (asking first unless ask is
// false: statusAll asked already), then asks again every 100 ms for up to
// leaderWait while the member answers but knows no leader: an election
// under way, which load or a leader change brings, is not an unhealthy
// member unless it lasts. took is the time to the last answer.
func (g *globals) healthOf(ctx context.Context, s *memberStatus, ask bool) {
	start := time.Now().Add(-s.took)
	if ask {
		s.st, s.err = g.statusOf(ctx, s.member.GrpcAddr)
		s.took = time.Since(start)
	}
	deadline := time.Now().Add(leaderWait)
	for s.err == nil && s.st.LeaderId == "" && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		s.st, s.err = g.statusOf(ctx, s.member.GrpcAddr)
		s.took = time.Since(start)
	}
}
