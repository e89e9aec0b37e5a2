package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"time"
)

// runCluster is what a run needs of the servers under test, and all that
// differs between Run (coord processes it starts itself, on loopback or in
// the lab's namespaces: localCluster) and RunCompose (the containers of
// docker-compose.yml: composeCluster). The runner calls configure, then
// start, and close at the end whatever happened; the rest only between a
// successful start and close.
type runCluster interface {
	// configure checks the run's configuration (with its defaults) before
	// anything is made, and keeps it.
	configure(cfg Config) error
	// options are the runner's settings for this kind of cluster.
	options() runOptions
	// start readies what the servers need (a binary or an image, the
	// network faults' lab or proxy), starts them and waits until every one
	// is healthy. It may add notes to rep, whose directory exists. It
	// returns the faults cfg.Nemeses name, bound to these servers.
	start(ctx context.Context, rep *Report) ([]fault, error)
	// addrs are the servers' ZooKeeper and gRPC addresses, for the clients.
	addrs() (zk, grpc []string)
	// restarts tells of each server restarted during the run (Env's
	// restart notices); nil: none are told.
	restarts() *Cluster
	// Leader is the index of the server that says it leads, or -1; ID is
	// server i's name in the report.
	Leader(ctx context.Context) int
	ID(i int) string
	// restartStopped starts again, after the last heal, every server that
	// is not running.
	restartStopped() []error
	// waitHealthy waits, bounded by ctx, until every server is healthy.
	waitHealthy(ctx context.Context) error
	// halt stops the servers once checked, before the report is written
	// (or leaves them up to have their logs read); its error is a note.
	halt() error
	// logs are the servers' log files in dir (written there now if they
	// are not already), for the report to link.
	logs(dir string) []string
	// close removes everything start made (unless told to keep it). It is
	// called once, also when configure or start failed.
	close()
}

// runOptions are the settings that differ between cluster kinds.
type runOptions struct {
	dirTag       string        // in the report directory's name: <time><tag>-seed<seed>
	faultTimeout time.Duration // bounds each fault's inject and heal
	// recoveryNote: a cluster that does not recover within a minute of
	// the last heal is a note in the report (RunCompose), not a failed
	// "recovery" verdict (Run).
	recoveryNote bool
}

// fault is a nemesis bound to the servers it acts on. A fault may also
// have a HealNote() string, added to the fault's description once healed.
type fault interface {
	Name() string
	Inject(ctx context.Context, r *rand.Rand) (string, error)
	Heal(ctx context.Context) error
}

// runner is one run's state, shared by its steps.
type runner struct {
	cfg       Config
	log       *slog.Logger
	c         runCluster
	opts      runOptions
	workloads []Workload
	faults    []fault
	rep       *Report
	hist      *History
	env       *Env
	stuck     []bool // workloads that did not stop after the run: not checked
	stopRoles func() // ends the leader watcher and waits for it
}

// runOn is Run and RunCompose: it configures and starts c, sets up and runs
// the workloads for cfg.Duration while the faults are injected on a seeded
// schedule, heals, waits for the cluster to recover, checks and writes the
// report. c is closed before it returns, whatever happens.
func runOn(ctx context.Context, cfg Config, c runCluster) (*Report, error) {
	cfg.defaults()
	r := &runner{cfg: cfg, log: cfg.Log, c: c, opts: c.options()}
	defer c.close()
	if err := r.prepare(); err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	r.exercise(ctx)
	r.recover(ctx)
	r.check(ctx)
	return r.finish()
}

// prepare checks the configuration and resolves the workloads.
func (r *runner) prepare() error {
	if err := r.c.configure(r.cfg); err != nil {
		return err
	}
	all := Workloads(r.cfg.Workers)
	for _, name := range r.cfg.Workloads {
		w, ok := all[name]
		if !ok {
			return fmt.Errorf("jepsen: unknown workload %q", name)
		}
		r.workloads = append(r.workloads, w)
	}
	r.workloads = append(r.workloads, r.cfg.extraWorkloads...)
	return nil
}

// start makes the report directory and starts the cluster.
func (r *runner) start(ctx context.Context) error {
	started := time.Now()
	dir := filepath.Join(r.cfg.Dir, fmt.Sprintf("%s%s-seed%d", started.Format("20060102-150405"), r.opts.dirTag, r.cfg.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.rep = &Report{Config: r.cfg, Dir: dir, Started: started}
	faults, err := r.c.start(ctx, r.rep)
	r.faults = faults
	return err
}

// setup gives the workloads their Env and lets them prepare their znodes.
func (r *runner) setup(ctx context.Context) error {
	r.hist = NewHistory()
	zk, grpc := r.c.addrs()
	r.env = &Env{Addrs: zk, GRPCAddrs: grpc, History: r.hist, Log: r.log, Seed: r.cfg.Seed, Dir: r.rep.Dir,
		OpTimeout: r.cfg.OpTimeout, SessionTimeout: r.cfg.SessionTimeout, cluster: r.c.restarts()}
	setupCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, w := range r.workloads {
		if err := w.Setup(setupCtx, r.env); err != nil {
			return fmt.Errorf("jepsen: %s setup: %w", w.Name(), err)
		}
	}
	return nil
}

// exercise runs the clients, the fault schedule and a leader watcher, the
// first two bounded by the run's duration; the watcher goes on until
// finish. It returns once the run is over, the workloads stopped (or were
// given up on) and the last fault healed.
func (r *runner) exercise(ctx context.Context) {
	runCtx, stopRun := context.WithTimeout(ctx, r.cfg.Duration)
	defer stopRun()
	stopped := make([]chan struct{}, len(r.workloads))
	for i, w := range r.workloads {
		stopped[i] = make(chan struct{})
		go func() {
			defer close(stopped[i])
			w.Run(runCtx, r.env)
		}()
	}
	healed := make(chan error, 1)
	go func() { healed <- r.schedule(runCtx) }()
	r.watchRoles(ctx)
	<-runCtx.Done()
	r.awaitWorkloads(stopped)
	if err := <-healed; err != nil {
		r.rep.Notes = append(r.rep.Notes, "heal: "+err.Error())
	}
}

// watchRoles starts the leader watcher, and sets stopRoles to end it.
func (r *runner) watchRoles(ctx context.Context) {
	roleCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchRoles(roleCtx, r.c, r.hist)
	}()
	r.stopRoles = func() {
		cancel()
		<-done
	}
}

// awaitWorkloads waits for the workloads to stop after the run's end. A
// workload must return soon after (each operation is bounded by the op
// timeout). One that does not is a harness bug: it is reported, its
// checker is not run, and the run goes on to heal, check the others and
// report rather than hang.
func (r *runner) awaitWorkloads(stopped []chan struct{}) {
	graceTime := 4*r.cfg.OpTimeout + 5*time.Second
	grace, expired := time.After(graceTime), false
	r.stuck = make([]bool, len(r.workloads))
	for i, w := range r.workloads {
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
		r.stuck[i] = true
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("workload %s did not stop within %v of the run's end (a harness bug); not checked", w.Name(), graceTime))
		r.log.Error("workload did not stop", "workload", w.Name())
	}
}

// recover starts what is down and waits for every server to serve again.
// Every server must do so within a minute of the last heal: one that
// cannot (it fails at start, say, on a log it wrote before a kill) fails
// the run (or, with recoveryNote, is a note), whatever the histories show.
func (r *runner) recover(ctx context.Context) {
	for _, err := range r.c.restartStopped() {
		r.rep.Notes = append(r.rep.Notes, err.Error())
	}
	recoverCtx, cancel := context.WithTimeout(ctx, time.Minute)
	t0 := time.Now()
	err := r.c.waitHealthy(recoverCtx)
	cancel()
	after := time.Since(t0).Round(time.Millisecond)
	switch {
	case err == nil:
		r.log.Info("cluster recovered", "after", after)
	case r.opts.recoveryNote:
		r.rep.Notes = append(r.rep.Notes, "cluster did not recover: "+err.Error())
	default:
		r.log.Error("cluster did not recover", "err", err)
	}
	if !r.opts.recoveryNote {
		r.rep.Verdicts = append(r.rep.Verdicts, recoveryVerdict(err, after))
	}
}

func recoveryVerdict(err error, after time.Duration) Verdict {
	if err != nil {
		return Verdict{Checker: "recovery", Result: Failed, Summary: "the cluster did not recover within a minute of the last heal",
			Details: []string{err.Error()}}
	}
	return Verdict{Checker: "recovery", Result: Pass, Summary: fmt.Sprintf("every server healthy %v after the last heal", after)}
}

// check runs every checker but those of the workloads that did not stop.
func (r *runner) check(ctx context.Context) {
	checkCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for i, w := range r.workloads {
		if r.stuck[i] {
			r.rep.Verdicts = append(r.rep.Verdicts, Verdict{Checker: w.Name(), Result: Unknown, Summary: "its workload did not stop after the run; not checked"})
			continue
		}
		v := w.Check(checkCtx, r.env)
		r.log.Info("checked", "checker", v.Checker, "result", v.Result, "summary", v.Summary)
		r.rep.Verdicts = append(r.rep.Verdicts, v)
	}
	// Servers the runner started itself answer its Admin calls: every one
	// must hold the same state at the end.
	if cl := r.c.restarts(); cl != nil {
		v := convergedVerdict(checkCtx, cl)
		r.log.Info("checked", "checker", v.Checker, "result", v.Result, "summary", v.Summary)
		r.rep.Verdicts = append(r.rep.Verdicts, v)
	}
}

// finish stops the leader watcher and the servers and writes the report.
func (r *runner) finish() (*Report, error) {
	r.stopRoles()
	if err := r.c.halt(); err != nil {
		r.rep.Notes = append(r.rep.Notes, "cleanup: "+err.Error())
		r.log.Error("cleanup", "err", err)
	}
	r.rep.Faults, r.rep.Roles = r.hist.Faults(), r.hist.Roles()
	r.rep.Elapsed = time.Since(r.rep.Started).Round(time.Millisecond).String()
	return r.rep, writeReport(r.rep, r.hist, r.c.logs)
}

// schedule injects faults until ctx ends: a quiet interval, a fault from a
// seeded choice, a hold, the heal. Whatever is injected is healed before
// it returns, also when ctx ends during a hold.
func (r *runner) schedule(ctx context.Context) error {
	if len(r.faults) == 0 {
		<-ctx.Done()
		return nil
	}
	rnd := rand.New(rand.NewSource(r.cfg.Seed))
	var errs []error
	for sleepDrawn(ctx, rnd, r.cfg.Interval) {
		f := r.faults[rnd.Intn(len(r.faults))]
		if err := r.inflict(ctx, rnd, f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// inflict injects f, holds it and heals it, and records it in the
// history. Its error is the heal's.
func (r *runner) inflict(ctx context.Context, rnd *rand.Rand, n fault) error {
	rec := Fault{Nemesis: n.Name(), Start: r.hist.Now()}
	// Faults are injected and healed with their own deadline, not the
	// run's: a heal must happen even after the run ended.
	fctx, cancel := context.WithTimeout(context.Background(), r.opts.faultTimeout)
	defer cancel()
	desc, err := n.Inject(fctx, rnd)
	rec.Desc = desc
	if err != nil {
		rec.Err = err.Error()
		r.log.Warn("inject", "nemesis", n.Name(), "desc", desc, "err", err)
	} else {
		r.log.Info("fault", "nemesis", n.Name(), "desc", desc)
		sleepDrawn(ctx, rnd, r.cfg.Hold)
	}
	healErr := n.Heal(fctx)
	if healErr != nil {
		rec.Err += " heal: " + healErr.Error()
	}
	cancel()
	if hn, ok := n.(interface{ HealNote() string }); ok && hn.HealNote() != "" {
		rec.Desc += "; healed: " + hn.HealNote()
	}
	rec.End = r.hist.Now()
	r.hist.AddFault(rec)
	r.log.Info("healed", "nemesis", n.Name())
	return healErr
}

// sleepDrawn sleeps for a time drawn from [base, 2 base) with rnd, and
// reports whether it slept that long rather than seeing ctx end.
func sleepDrawn(ctx context.Context, rnd *rand.Rand, base time.Duration) bool {
	d := base + time.Duration(rnd.Int63n(int64(base)))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// leaderSource is what the leader watcher asks.
type leaderSource interface {
	Leader(ctx context.Context) int
	ID(i int) string
}

// watchRoles records each change of the leader it sees, every 250 ms.
func watchRoles(ctx context.Context, c leaderSource, hist *History) {
	last := "?"
	for {
		l := ""
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		if i := c.Leader(lctx); i >= 0 {
			l = c.ID(i)
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
