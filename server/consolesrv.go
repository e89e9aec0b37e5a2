package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"coord/api"
	"coord/server/console"
	"coord/server/replica"
	"coord/server/sessions"
	"coord/vocab"
)

// consoleServer is the server as the console (server/console) sees it:
// sessions on this server's session layer, the Admin service's admin
// identity, and the cluster read from every member on the peer plane.
type consoleServer struct{ s *Server }

var _ console.Server = consoleServer{}

func (c consoleServer) ID() string { return c.s.cfg.ID }

func (c consoleServer) Connect(ctx context.Context, req *sessions.ConnectRequest, ip string) (*sessions.Conn, *sessions.ConnectReply, error) {
	return c.s.sess.Connect(ctx, req, ip)
}

func (c consoleServer) Touch(id int64) { c.s.sess.Touch(id) }

func (c consoleServer) X509Identity(cs *tls.ConnectionState) (vocab.Id, bool) {
	return x509Identity(cs)
}

func (c consoleServer) IsAdmin(userPassword string, x509 *vocab.Id) bool {
	cfg := &c.s.cfg
	if userPassword != "" && cfg.SuperDigest != "" && superDigestMatches(userPassword, cfg.SuperDigest) {
		return true
	}
	return x509 != nil && slices.Contains(cfg.AdminX509, x509.ID)
}

// peerAdmin is the Admin service of member m: this server's own, or m's on
// the peer plane (where a member may call everything).
func (c consoleServer) peerAdmin(m replica.Member) (api.AdminServer, api.AdminClient, error) {
	if m.ID == c.s.cfg.ID {
		return &adminService{s: c.s, peer: true}, nil, nil
	}
	cc, err := c.s.rep.PeerConn(m.Addr)
	if err != nil {
		return nil, nil, err
	}
	return nil, api.NewAdminClient(cc), nil
}

type memberReading struct {
	status  *api.StatusResponse
	samples *api.SamplesResponse
	err     error
}

// read asks every member for its Status and Samples, together, each
// bounded by RaftTimeout.
func (c consoleServer) read(ctx context.Context, servers []replica.Member) []memberReading {
	out := make([]memberReading, len(servers))
	ctx, cancel := context.WithTimeout(ctx, c.s.cfg.RaftTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, m := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local, remote, err := c.peerAdmin(m)
			if err != nil {
				out[i].err = err
				return
			}
			if local != nil {
				out[i].status, out[i].err = local.Status(ctx, &api.StatusRequest{})
				if out[i].err == nil {
					out[i].samples, _ = local.Samples(ctx, &api.SamplesRequest{})
				}
				return
			}
			out[i].status, out[i].err = remote.Status(ctx, &api.StatusRequest{})
			if out[i].err == nil && out[i].status.Id != m.ID {
				out[i].err = fmt.Errorf("%s answers as %s", m.Addr, out[i].status.Id)
			}
			if out[i].err == nil {
				out[i].samples, _ = remote.Samples(ctx, &api.SamplesRequest{})
			}
		}()
	}
	wg.Wait()
	return out
}

func (c consoleServer) Cluster(ctx context.Context) (*console.Cluster, error) {
	s := c.s
	servers, err := s.rep.Configuration()
	if err != nil {
		return nil, err
	}
	_, leaderID := s.rep.LeaderWithID()
	readings := c.read(ctx, servers)
	cl := &console.Cluster{Server: s.cfg.ID, Leader: leaderID, Samples: map[string][]console.Sample{}, IntervalMs: sampleInterval.Milliseconds()}
	var leaderApplied uint64
	var leaderSamples []*api.Sample
	for i, m := range servers {
		if m.ID == leaderID && readings[i].err == nil {
			leaderApplied = readings[i].status.AppliedIndex
			if readings[i].samples != nil {
				leaderSamples = readings[i].samples.Samples
			}
		}
	}
	s.mu.Lock()
	known := map[string]Member{}
	for id, m := range s.members {
		known[id] = m
	}
	s.mu.Unlock()
	for i, m := range servers {
		role, suffrage := "voter", "voter"
		if !m.Voter {
			role, suffrage = "observer", "nonvoter"
		}
		cl.Raft = append(cl.Raft, console.RaftServer{ID: m.ID, Address: m.Addr, Suffrage: suffrage})
		row := console.Member{ID: m.ID, Role: role, Leader: m.ID == leaderID, RaftAddr: m.Addr,
			GRPCAddr: known[m.ID].GRPCAddr, ZKAddr: known[m.ID].ZKAddr, State: "unreachable"}
		if rd := readings[i]; rd.err == nil {
			st := rd.status
			row.Alive = true
			row.HTTPAddr = st.HttpAddr
			row.State = st.Role
			row.Healthy = st.LeaderId != "" && st.Role != "candidate"
			row.LastZxid = fmt.Sprintf("0x%x", uint64(st.LastZxid))
			row.AppliedIndex, row.CommitIndex = st.AppliedIndex, st.CommitIndex
			row.Sessions, row.Watches, row.Znodes, row.UptimeMs = st.Sessions, st.Watches, st.Znodes, st.UptimeMs
			if leaderApplied > 0 {
				row.Lag = int64(leaderApplied) - int64(st.AppliedIndex)
				row.Lag = max(row.Lag, 0)
			}
			if rd.samples != nil {
				cl.Samples[m.ID] = chartSamples(rd.samples.Samples, leaderSamples)
			}
		}
		cl.Members = append(cl.Members, row)
	}
	return cl, nil
}

// chartSamples turns a member's readings (totals) into rates between
// consecutive readings, with its lag behind the leader's applied index at
// the leader's reading nearest in time.
func chartSamples(own, leader []*api.Sample) []console.Sample {
	var out []console.Sample
	for i := 1; i < len(own); i++ {
		a, b := own[i-1], own[i]
		dt := float64(b.UnixMs-a.UnixMs) / 1000
		if dt <= 0 || b.Reads < a.Reads || b.Writes < a.Writes {
			continue
		}
		pt := console.Sample{T: b.UnixMs, ReadsPerS: float64(b.Reads-a.Reads) / dt, WritesPerS: float64(b.Writes-a.Writes) / dt,
			WriteP50Ms: b.WriteP50Ms, WriteP99Ms: b.WriteP99Ms}
		if len(leader) > 0 {
			j := sort.Search(len(leader), func(j int) bool { return leader[j].UnixMs >= b.UnixMs })
			if j == len(leader) || (j > 0 && b.UnixMs-leader[j-1].UnixMs < leader[j].UnixMs-b.UnixMs) {
				j--
			}
			pt.Lag = max(int64(leader[j].AppliedIndex)-int64(b.AppliedIndex), 0)
		}
		out = append(out, pt)
	}
	return out
}

// Sessions lists the session table with each session's server (the owner
// of its connection) and, asked of that server, its watches.
func (c consoleServer) Sessions(ctx context.Context) ([]console.SessionRow, error) {
	s := c.s
	servers, err := s.rep.Configuration()
	if err != nil {
		return nil, err
	}
	watches := map[int64]int64{}
	var mu sync.Mutex
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RaftTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local, remote, err := c.peerAdmin(m)
			if err != nil {
				return
			}
			var resp *api.SessionsResponse
			if local != nil {
				resp, err = local.Sessions(rctx, &api.SessionsRequest{})
			} else {
				resp, err = remote.Sessions(rctx, &api.SessionsRequest{})
			}
			if err != nil {
				return
			}
			mu.Lock()
			for _, si := range resp.Sessions {
				if si.ConnectedHere {
					watches[si.Id] = si.Watches
				}
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	var rows []console.SessionRow
	for _, info := range s.rep.View().Sessions() {
		row := console.SessionRow{ID: fmt.Sprintf("0x%x", uint64(info.ID)), Server: ownerServer(info.Owner),
			TimeoutMs: info.Timeout, Ephemerals: int64(info.Ephemerals)}
		if n, ok := watches[info.ID]; ok {
			row.Watches = &n
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// ownerServer is the server id in a session owner ("s1#boot/n").
func ownerServer(owner string) string {
	id, _, _ := strings.Cut(owner, "#")
	return id
}

// onLeader runs an Admin call on the leader: here, or on the peer plane.
func (c consoleServer) onLeader(ctx context.Context, local func(a *adminService) error, remote func(ac api.AdminClient) error) error {
	s := c.s
	if s.rep.IsLeader() {
		return local(&adminService{s: s, peer: true})
	}
	cc, err := s.leaderConn(ctx)
	if err != nil {
		return err
	}
	return remote(api.NewAdminClient(cc))
}

func (c consoleServer) CloseSession(ctx context.Context, who string, id int64) error {
	c.s.log.Info("console: close session", "by", who, "session", fmt.Sprintf("0x%x", uint64(id)))
	_, err := (&adminService{s: c.s, peer: true, caller: who}).KillSession(ctx, &api.KillSessionRequest{Id: id})
	return err
}

func (c consoleServer) TransferLeadership(ctx context.Context, who, id string) (string, error) {
	c.s.log.Info("console: transfer leadership", "by", who, "to", id)
	var leader string
	err := c.onLeader(ctx, func(a *adminService) error {
		r, err := a.TransferLeadership(ctx, &api.TransferLeadershipRequest{Id: id})
		if err == nil {
			leader = r.LeaderId
		}
		return err
	}, func(ac api.AdminClient) error {
		r, err := ac.TransferLeadership(ctx, &api.TransferLeadershipRequest{Id: id})
		if err == nil {
			leader = r.LeaderId
		}
		return err
	})
	return leader, err
}

// member is id's entry in raft's configuration.
func (c consoleServer) member(id string) (replica.Member, error) {
	servers, err := c.s.rep.Configuration()
	if err != nil {
		return replica.Member{}, err
	}
	for _, m := range servers {
		if m.ID == id {
			return m, nil
		}
	}
	return replica.Member{}, fmt.Errorf("%s is not a member", id)
}

func (c consoleServer) Promote(ctx context.Context, who, id string) error {
	m, err := c.member(id)
	if err != nil {
		return err
	}
	if m.Voter {
		return fmt.Errorf("%s is a voter already", id)
	}
	c.s.log.Info("console: promote", "by", who, "member", id)
	req := &api.AddServerRequest{Id: m.ID, RaftAddr: m.Addr}
	return c.onLeader(ctx, func(a *adminService) error {
		_, err := a.AddServer(ctx, req)
		return err
	}, func(ac api.AdminClient) error {
		_, err := ac.AddServer(ctx, req)
		return err
	})
}

func (c consoleServer) Remove(ctx context.Context, who, id string) error {
	if _, err := c.member(id); err != nil {
		return err
	}
	c.s.log.Info("console: remove member", "by", who, "member", id)
	req := &api.RemoveServerRequest{Id: id}
	err := c.onLeader(ctx, func(a *adminService) error {
		_, err := a.RemoveServer(ctx, req)
		return err
	}, func(ac api.AdminClient) error {
		_, err := ac.RemoveServer(ctx, req)
		return err
	})
	if errors.Is(err, errNotLeader) {
		return fmt.Errorf("%w (the leader changed; try again)", err)
	}
	return err
}
