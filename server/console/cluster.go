package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
)

// Cluster is the cluster view: every member as the server it runs in sees
// it, and each member's recent samples. Package server fills it from raft's
// configuration, each member's Status and Samples (asked on the peer
// plane) and gossip.
type Cluster struct {
	Server     string              `json:"server"`
	Leader     string              `json:"leader"`
	Members    []Member            `json:"members"`
	Raft       []RaftServer        `json:"raft"`
	Samples    map[string][]Sample `json:"samples"`
	IntervalMs int64               `json:"interval_ms"`
}

// Member is one member's row.
type Member struct {
	ID           string `json:"id"`
	Role         string `json:"role"`  // voter or observer
	State        string `json:"state"` // leader, follower, observer, candidate or unreachable
	Leader       bool   `json:"leader"`
	Alive        bool   `json:"alive"`
	Healthy      bool   `json:"healthy"`
	RaftAddr     string `json:"raft_addr"`
	GRPCAddr     string `json:"grpc_addr"`
	ZKAddr       string `json:"zk_addr"`
	HTTPAddr     string `json:"http_addr"`
	LastZxid     string `json:"last_zxid"`
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
	Lag          int64  `json:"lag"` // entries behind the leader's applied index
	Sessions     int64  `json:"sessions"`
	Watches      int64  `json:"watches"`
	Znodes       int64  `json:"znodes"`
	UptimeMs     int64  `json:"uptime_ms"`
}

// RaftServer is one server of raft's configuration.
type RaftServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"` // voter or nonvoter
}

// Sample is one point of a member's charts.
type Sample struct {
	T          int64   `json:"t"` // unix ms
	ReadsPerS  float64 `json:"reads_per_s"`
	WritesPerS float64 `json:"writes_per_s"`
	WriteP50Ms float64 `json:"write_p50_ms"`
	WriteP99Ms float64 `json:"write_p99_ms"`
	Lag        int64   `json:"lag"`
}

// SessionRow is one session of the sessions view.
type SessionRow struct {
	ID         string `json:"id"`
	Server     string `json:"server"`
	TimeoutMs  int32  `json:"timeout_ms"`
	Ephemerals int64  `json:"ephemerals"`
	Watches    *int64 `json:"watches"` // nil: its server did not answer
	Console    bool   `json:"console"`
}

func (c *Console) cluster(si *signIn, r *http.Request) (any, error) {
	cl, err := c.srv.Cluster(r.Context())
	if err != nil {
		return nil, errorf(http.StatusServiceUnavailable, "Unavailable", err.Error())
	}
	return cl, nil
}

func (c *Console) sessions(si *signIn, r *http.Request) (any, error) {
	rows, err := c.srv.Sessions(r.Context())
	if err != nil {
		return nil, errorf(http.StatusServiceUnavailable, "Unavailable", err.Error())
	}
	consoles := map[string]bool{}
	c.mu.Lock()
	for _, o := range c.signIns {
		o.mu.Lock()
		if o.link != nil {
			consoles[hexID(o.link.id)] = true
		}
		o.mu.Unlock()
	}
	c.mu.Unlock()
	for i := range rows {
		// Console sessions of this server are known here; those of
		// other servers' consoles are not marked.
		rows[i].Console = consoles[rows[i].ID]
	}
	return map[string]any{"sessions": rows}, nil
}

func (c *Console) closeSession(si *signIn, r *http.Request) (any, error) {
	var req struct {
		ID string `json:"id"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(req.ID, "0x"), 16, 64)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "BadArguments", "session id "+strconv.Quote(req.ID)+": want hex, as 0x1a2b")
	}
	if err := c.srv.CloseSession(r.Context(), "console:"+si.who(), int64(id)); err != nil {
		return nil, errorf(http.StatusConflict, "Refused", err.Error())
	}
	return struct{}{}, nil
}

type memberReq struct {
	ID string `json:"id"`
}

func (c *Console) transfer(si *signIn, r *http.Request) (any, error) {
	var req memberReq
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	leader, err := c.srv.TransferLeadership(r.Context(), "console:"+si.who(), req.ID)
	if err != nil {
		return nil, errorf(http.StatusConflict, "Refused", err.Error())
	}
	return map[string]string{"leader": leader}, nil
}

func (c *Console) promote(si *signIn, r *http.Request) (any, error) {
	return c.membership(si, r, c.srv.Promote)
}

func (c *Console) remove(si *signIn, r *http.Request) (any, error) {
	return c.membership(si, r, c.srv.Remove)
}

// membership runs a membership action on the member the request names.
func (c *Console) membership(si *signIn, r *http.Request, do func(ctx context.Context, who, id string) error) (any, error) {
	var req memberReq
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, errorf(http.StatusBadRequest, "BadArguments", "which member?")
	}
	if err := do(r.Context(), "console:"+si.who(), req.ID); err != nil {
		return nil, errorf(http.StatusConflict, "Refused", err.Error())
	}
	return struct{}{}, nil
}
