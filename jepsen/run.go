package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"sync"
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
	// Env is more environment for the servers (COORD_PLANTED=...).
	Env       []string
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
	cfg.defaults()
	log := cfg.Log
	started := time.Now()
	dir := filepath.Join(cfg.Dir, fmt.Sprintf("%s-seed%d", started.Format("20060102-150405"), cfg.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, Dir: dir, Started: started}

	bin := cfg.Bin
	if bin == "" {
		binDir, err := os.MkdirTemp("", "jepsen-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(binDir)
		if bin, err = BuildCoord(ctx, binDir, cfg.Tags...); err != nil {
			return nil, err
		}
	}

	// Partitions need the lab; without it (or with Net "proxy") they go
	// through the TCP proxy, and the report says so.
	needLab, labSize := labNeeds(cfg.Nemeses, cfg.Voters+cfg.Observers)
	var lab *Lab
	var proxy *Proxy
	switch cfg.Net {
	case "", "auto", "netns", "proxy":
	default:
		return nil, fmt.Errorf("jepsen: Config.Net %q: want netns, proxy or auto", cfg.Net)
	}
	if needLab && cfg.Net != "proxy" {
		var err error
		lab, err = NewLab(labSize, log)
		if err != nil {
			if !errors.Is(err, ErrNoLab) || cfg.Net == "netns" {
				return nil, err
			}
			rep.Notes = append(rep.Notes, "no network namespaces ("+err.Error()+"): the network nemeses (partitions, latency, loss) go through a TCP proxy per peer link")
			log.Warn("no network lab: network nemeses through the TCP proxy", "err", err)
		} else {
			defer func() {
				if err := lab.Close(); err != nil {
					log.Error("lab cleanup", "err", err)
				}
			}()
		}
	}
	if needLab && lab == nil {
		if cfg.Net == "proxy" {
			rep.Notes = append(rep.Notes, "-net proxy: the network nemeses (partitions, latency, loss) go through a TCP proxy per peer link")
		}
		proxy = NewProxy(cfg.Seed, log)
		defer proxy.Close()
	}
	known := Nemeses(lab)
	if proxy != nil {
		addProxyNemeses(known, proxy)
	}
	var nemeses []Nemesis
	for _, name := range cfg.Nemeses {
		n, ok := known[name]
		if !ok {
			if lab == nil && needsLab(name) {
				continue
			}
			return nil, fmt.Errorf("jepsen: unknown nemesis %q (known: %v)", name, NemesisNames(lab))
		}
		nemeses = append(nemeses, n)
	}
	allWorkloads := Workloads(cfg.Workers)
	var workloads []Workload
	for _, name := range cfg.Workloads {
		w, ok := allWorkloads[name]
		if !ok {
			return nil, fmt.Errorf("jepsen: unknown workload %q", name)
		}
		workloads = append(workloads, w)
	}
	workloads = append(workloads, cfg.extraWorkloads...)

	nemeses, notes, cleanup := prepareNemeses(nemeses, dir, cfg.Voters, log)
	rep.Notes = append(rep.Notes, notes...)
	defer cleanup()

	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	cl, err := StartCluster(startCtx, ClusterConfig{Bin: bin, Dir: dir, Voters: cfg.Voters, Observers: cfg.Observers,
		Lab: lab, Proxy: proxy, Env: cfg.Env, Log: log})
	cancel()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	log.Info("cluster up", "servers", cl.Size(), "addrs", cl.Addrs(), "dir", dir)

	hist := NewHistory()
	env := &Env{Addrs: cl.Addrs(), GRPCAddrs: cl.GRPCAddrs(), History: hist, Log: log, Seed: cfg.Seed, Dir: dir,
		OpTimeout: cfg.OpTimeout, SessionTimeout: cfg.SessionTimeout, cluster: cl}
	setupCtx, cancel := context.WithTimeout(ctx, time.Minute)
	for _, w := range workloads {
		if err := w.Setup(setupCtx, env); err != nil {
			cancel()
			return nil, fmt.Errorf("jepsen: %s setup: %w", w.Name(), err)
		}
	}
	cancel()

	// The clients, the nemesis schedule and a leader watcher, all bounded
	// by the run's duration.
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Duration)
	defer stopRun()
	stopped := make([]chan struct{}, len(workloads))
	for i, w := range workloads {
		stopped[i] = make(chan struct{})
		go func() {
			defer close(stopped[i])
			w.Run(runCtx, env)
		}()
	}
	var nemesisWG sync.WaitGroup
	var healErr error
	nemesisWG.Add(1)
	go func() {
		defer nemesisWG.Done()
		healErr = schedule(runCtx, cl, hist, nemeses, cfg, log)
	}()
	roleCtx, stopRoles := context.WithCancel(ctx)
	var roleWG sync.WaitGroup
	roleWG.Add(1)
	go func() {
		defer roleWG.Done()
		watchRoles(roleCtx, cl, hist)
	}()
	// A workload must return soon after the run ends (each operation is
	// bounded by the op timeout). One that does not is a harness bug: it
	// is reported, its checker is not run, and the run goes on to heal,
	// check the others and report rather than hang.
	<-runCtx.Done()
	graceTime := 4*cfg.OpTimeout + 5*time.Second
	grace, expired := time.After(graceTime), false
	stuck := make([]bool, len(workloads))
	for i, w := range workloads {
		if !expired {
			select {
			case <-stopped[i]:
				continue
			case <-grace:
				expired = true
			}
		}
		select {
		case <-stopped[i]:
			continue
		default:
		}
		stuck[i] = true
		rep.Notes = append(rep.Notes, fmt.Sprintf("workload %s did not stop within %v of the run's end (a harness bug); not checked", w.Name(), graceTime))
		log.Error("workload did not stop", "workload", w.Name())
	}
	nemesisWG.Wait()
	if healErr != nil {
		rep.Notes = append(rep.Notes, "heal: "+healErr.Error())
	}

	// Recovery: every server runs and serves again.
	for i := 0; i < cl.Size(); i++ {
		if !cl.Running(i) {
			if err := cl.Start(i); err != nil {
				rep.Notes = append(rep.Notes, err.Error())
			}
		}
	}
	recoverCtx, cancel := context.WithTimeout(ctx, time.Minute)
	t0 := time.Now()
	err = cl.WaitHealthy(recoverCtx)
	cancel()
	// Every server must serve again within a minute of the last heal: one
	// that cannot (it fails at start, say, on a log it wrote before a
	// kill) fails the run, whatever the histories show.
	recovery := Verdict{Checker: "recovery", Result: Pass}
	if err != nil {
		recovery.Result, recovery.Summary = Failed, "the cluster did not recover within a minute of the last heal"
		recovery.Details = []string{err.Error()}
		log.Error("cluster did not recover", "err", err)
	} else {
		recovery.Summary = fmt.Sprintf("every server healthy %v after the last heal", time.Since(t0).Round(time.Millisecond))
		log.Info("cluster recovered", "after", time.Since(t0).Round(time.Millisecond))
	}
	rep.Verdicts = append(rep.Verdicts, recovery)

	checkCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	for i, w := range workloads {
		if stuck[i] {
			rep.Verdicts = append(rep.Verdicts, Verdict{Checker: w.Name(), Result: Unknown, Summary: "its workload did not stop after the run; not checked"})
			continue
		}
		v := w.Check(checkCtx, env)
		log.Info("checked", "checker", v.Checker, "result", v.Result, "summary", v.Summary)
		rep.Verdicts = append(rep.Verdicts, v)
	}
	cancel()
	stopRoles()
	roleWG.Wait()
	cl.Close()
	if err := cleanup(); err != nil {
		rep.Notes = append(rep.Notes, "cleanup: "+err.Error())
		log.Error("cleanup", "err", err)
	}
	rep.Faults, rep.Roles = hist.Faults(), hist.Roles()
	rep.Elapsed = time.Since(started).Round(time.Millisecond).String()
	if err := writeReport(rep, hist, cl); err != nil {
		return rep, err
	}
	return rep, nil
}

// schedule injects faults until ctx ends: a quiet interval, a fault from a
// seeded choice, a hold, the heal. Whatever is injected is healed before
// it returns, also when ctx ends during a hold.
func schedule(ctx context.Context, cl *Cluster, hist *History, nemeses []Nemesis, cfg Config, log *slog.Logger) error {
	if len(nemeses) == 0 {
		<-ctx.Done()
		return nil
	}
	r := rand.New(rand.NewSource(cfg.Seed))
	sleep := func(base time.Duration) bool {
		d := base + time.Duration(r.Int63n(int64(base)))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	var errs []error
	for sleep(cfg.Interval) {
		n := nemeses[r.Intn(len(nemeses))]
		f := Fault{Nemesis: n.Name(), Start: hist.Now()}
		// Faults are injected and healed with their own deadline, not the
		// run's: a heal must happen even after the run ended.
		fctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		desc, err := n.Inject(fctx, cl, r)
		f.Desc = desc
		if err != nil {
			f.Err = err.Error()
			log.Warn("inject", "nemesis", n.Name(), "desc", desc, "err", err)
		} else {
			log.Info("fault", "nemesis", n.Name(), "desc", desc)
			sleep(cfg.Hold)
		}
		if err := n.Heal(fctx, cl); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name(), err))
			f.Err += " heal: " + err.Error()
		}
		cancel()
		if hn, ok := n.(interface{ HealNote() string }); ok && hn.HealNote() != "" {
			f.Desc += "; healed: " + hn.HealNote()
		}
		f.End = hist.Now()
		hist.AddFault(f)
		log.Info("healed", "nemesis", n.Name())
	}
	return errors.Join(errs...)
}

// watchRoles records each change of the leader it sees, every 250 ms.
func watchRoles(ctx context.Context, cl *Cluster, hist *History) {
	last := "?"
	for {
		l := ""
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		if i := cl.Leader(lctx); i >= 0 {
			l = cl.ID(i)
		}
		cancel()
		if l != last && ctx.Err() == nil {
			hist.AddRole(RoleChange{At: hist.Now(), Leader: l})
			last = l
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
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
