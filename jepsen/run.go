package jepsen

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sort"
	"time"
)

// Config is one run's parameters. They are written into the report.
type Config struct {
	Voters, Observers int
	Duration          time.Duration // how long the clients run
	Seed              int64
	Nemeses           []string // names from Nemeses; empty: no faults
	Workloads         []string // names from Workloads
	Workers           int      // clients per workload (sessions and sequential get half)
	// Interval is the quiet time between faults and Hold how long a fault
	// lasts; each is drawn from [x, 2x) with the seeded source.
	Interval, Hold time.Duration
	Dir            string // results directory: the run gets a subdirectory
	// Bin is a prebuilt coord binary; otherwise ./cmd/coord is built with
	// Tags.
	Bin  string
	Tags []string
	// Env is more environment for the servers (COORD_PLANTED=...), Args
	// more coord flags (after the runner's own, so they win).
	Env       []string
	Args      []string
	OpTimeout time.Duration
	// SessionTimeout is what the clients ask for (4 s by default).
	SessionTimeout time.Duration
	// Net is how the network nemeses cut links: "netns" (the Lab: network
	// namespaces and iptables, root only), "proxy" (a fault-injecting TCP
	// proxy per peer link, no privileges) or "auto"/"" (the Lab where it
	// can be made, else the proxy).
	Net string
	Log *slog.Logger `json:"-"`

	// extraWorkloads, in tests, run beside the named ones.
	extraWorkloads []Workload
}

func (c *Config) defaults() {
	if c.Voters == 0 {
		c.Voters = 3
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Interval == 0 {
		c.Interval = 2 * time.Second
	}
	if c.Hold == 0 {
		c.Hold = 2 * time.Second
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 3 * time.Second
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 4 * time.Second
	}
	if c.Dir == "" {
		c.Dir = "jepsen-results"
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Report is what a run found.
type Report struct {
	Config   Config       `json:"config"`
	Dir      string       `json:"dir"`
	Started  time.Time    `json:"started"`
	Elapsed  string       `json:"elapsed"`
	Verdicts []Verdict    `json:"verdicts"`
	Faults   []Fault      `json:"faults"`
	Roles    []RoleChange `json:"roles"`
	Notes    []string     `json:"notes,omitempty"`
}

// Valid reports whether every checker passed.
func (r *Report) Valid() bool {
	for _, v := range r.Verdicts {
		if v.Result != Pass {
			return false
		}
	}
	return len(r.Verdicts) > 0
}

// Verdict returns the named checker's verdict.
func (r *Report) Verdict(checker string) (Verdict, bool) {
	for _, v := range r.Verdicts {
		if v.Checker == checker {
			return v, true
		}
	}
	return Verdict{}, false
}

// Run runs one test: it starts the cluster, runs the workloads for
// cfg.Duration while the nemeses inject faults, heals everything, waits
// for the cluster to recover, checks, and writes the report into a new
// directory under cfg.Dir. Everything it started or built is stopped and
// removed before it returns, whatever happens. The error is for a run that
// could not be made; a run whose checkers fail returns a Report and nil.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	return runOn(ctx, cfg, &localCluster{})
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// sortedOps is the history in invocation order.
func sortedOps(h *History) []Op {
	ops := h.Ops("")
	sort.Slice(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
	return ops
}
