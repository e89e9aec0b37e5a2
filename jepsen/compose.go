package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ComposeOptions says which compose cluster RunCompose runs against: the
// repository's docker-compose.yml (3 voters, 1 observer), under a project
// name of its own so that it runs beside `make up`.
type ComposeOptions struct {
	Root       string // repository root (docker-compose.yml, deploy/); default "."
	Project    string // compose project; default jepsen<pid>
	Subnet     string // first three octets of the project's /24; default 10.214.<pid%250+1>
	PortPrefix string // host port prefix (docker-compose.yml): ports <prefix>N18x; default "6"
	// Image is the image to run; empty: build coord:<project> from Root
	// with deploy/build-image.sh (and remove it at the end).
	Image string
	Keep  bool // leave the project up (and the image) after the run
}

// ComposeNemesisNames are the faults RunCompose knows, all through the
// docker command: kill and kill-leader (docker kill, healed by docker
// start), pause and pause-leader (docker pause / unpause: the whole
// container's cgroup is frozen), disconnect and disconnect-leader (docker
// network disconnect of one server, healed by reconnecting it at its
// address).
var ComposeNemesisNames = []string{"kill", "kill-leader", "pause", "pause-leader", "disconnect", "disconnect-leader"}

// composeCluster is the compose project: its servers are services coord1..4.
type composeCluster struct {
	opts     ComposeOptions
	compose  []string // docker-compose or docker compose, with -f and -p
	env      []string
	services []string
	log      *slog.Logger
}

func (c *composeCluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = c.opts.Root, c.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (c *composeCluster) composeRun(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, c.compose[0], append(append([]string{}, c.compose[1:]...), args...)...)
}

func (c *composeCluster) container(ctx context.Context, i int) (string, error) {
	out, err := c.composeRun(ctx, "ps", "-q", c.services[i])
	if err == nil && strings.TrimSpace(out) == "" {
		err = fmt.Errorf("jepsen: no container for %s", c.services[i])
	}
	return strings.TrimSpace(out), err
}

func (c *composeCluster) docker(ctx context.Context, verb string, i int, extra ...string) error {
	id, err := c.container(ctx, i)
	if err != nil {
		return err
	}
	args := append([]string{verb}, extra...)
	_, err = c.run(ctx, "docker", append(args, id)...)
	return err
}

func (c *composeCluster) port(i int, kind string) string {
	return fmt.Sprintf("127.0.0.1:%s%d%s", c.opts.PortPrefix, i+1, kind)
}

func (c *composeCluster) ip(i int) string { return fmt.Sprintf("%s.%d", c.opts.Subnet, 11+i) }

func (c *composeCluster) network() string { return c.opts.Project + "_coordnet" }

func (c *composeCluster) health(ctx context.Context, i int) (Health, error) {
	var h Health
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+c.port(i, "180")+"/health", nil)
	if err != nil {
		return h, err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

func (c *composeCluster) leader(ctx context.Context) int {
	for i := range c.services {
		if h, err := c.health(ctx, i); err == nil && h.Healthy && h.Role == "leader" {
			return i
		}
	}
	return -1
}

func (c *composeCluster) waitHealthy(ctx context.Context) error {
	for i, s := range c.services {
		for {
			if h, err := c.health(ctx, i); err == nil && h.Healthy {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("jepsen: %s not healthy: %w", s, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// composeFault is one injected fault and how to heal it.
type composeFault struct {
	desc string
	heal func(context.Context) error
}

// inject applies the named nemesis to a server chosen with r (the leader
// for the -leader ones; a voter for disconnect, so that a majority stays).
func (c *composeCluster) inject(ctx context.Context, name string, r *rand.Rand) (composeFault, error) {
	target := r.Intn(len(c.services))
	kind, leaderOnly := strings.CutSuffix(name, "-leader")
	if leaderOnly {
		if target = c.leader(ctx); target < 0 {
			return composeFault{desc: "no leader"}, errors.New("jepsen: no leader to target")
		}
	} else if kind == "disconnect" {
		target = r.Intn(3) // one voter of three: a minority
	}
	s := c.services[target]
	switch kind {
	case "kill":
		return composeFault{"docker kill " + s, func(ctx context.Context) error { return c.docker(ctx, "start", target) }},
			c.docker(ctx, "kill", target)
	case "pause":
		return composeFault{"docker pause " + s, func(ctx context.Context) error { return c.docker(ctx, "unpause", target) }},
			c.docker(ctx, "pause", target)
	case "disconnect":
		heal := func(ctx context.Context) error {
			return c.docker(ctx, "network", target, "connect", "--ip", c.ip(target), c.network())
		}
		return composeFault{"docker network disconnect " + s, heal}, c.docker(ctx, "network", target, "disconnect", c.network())
	}
	return composeFault{}, fmt.Errorf("jepsen: unknown compose nemesis %q (known: %v)", name, ComposeNemesisNames)
}

// RunCompose is Run against the compose cluster of docker-compose.yml
// instead of processes it starts itself: it builds the image (unless
// opts.Image is given), brings the project up, runs cfg's workloads through
// the servers' published ports for cfg.Duration while the compose nemeses
// (ComposeNemesisNames) inject faults on a seeded schedule, heals, waits
// for every server to be healthy, checks, writes the report (with each
// container's log) and takes the project down with its volumes. cfg.Voters
// and cfg.Observers are those of the compose file (3 and 1). Workloads that
// react to a server's restart (the sessions workload's racers) get no
// restart notices here.
func RunCompose(ctx context.Context, cfg Config, opts ComposeOptions) (*Report, error) {
	cfg.Voters, cfg.Observers, cfg.Bin, cfg.Tags, cfg.Env = 3, 1, "", nil, nil
	cfg.defaults()
	log := cfg.Log
	if opts.Root == "" {
		opts.Root = "."
	}
	if opts.Project == "" {
		opts.Project = fmt.Sprintf("jepsen%d", os.Getpid())
	}
	if opts.Subnet == "" {
		opts.Subnet = fmt.Sprintf("10.214.%d", os.Getpid()%250+1)
	}
	if opts.PortPrefix == "" {
		opts.PortPrefix = "6"
	}
	for _, n := range cfg.Nemeses {
		known := false
		for _, k := range ComposeNemesisNames {
			known = known || n == k
		}
		if !known {
			return nil, fmt.Errorf("jepsen: unknown compose nemesis %q (known: %v)", n, ComposeNemesisNames)
		}
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
	composeCmd := []string{"docker-compose"}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		composeCmd = []string{"docker", "compose"}
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	opts.Root = root
	buildImage := opts.Image == ""
	if buildImage {
		opts.Image = "coord:" + opts.Project
	}
	c := &composeCluster{opts: opts, log: log, services: []string{"coord1", "coord2", "coord3", "coord4"},
		compose: append(composeCmd, "-f", filepath.Join(root, "docker-compose.yml"), "-p", opts.Project)}
	c.env = append(os.Environ(), "COORD_IMAGE="+opts.Image, "COORD_SUBNET="+opts.Subnet,
		"COORD_PORT_PREFIX="+opts.PortPrefix, "BIN_DIR=build/"+opts.Project, "COMPOSE="+strings.Join(c.compose, " "))

	started := time.Now()
	dir := filepath.Join(cfg.Dir, fmt.Sprintf("%s-compose-seed%d", started.Format("20060102-150405"), cfg.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, Dir: dir, Started: started}
	rep.Notes = append(rep.Notes, fmt.Sprintf("compose project %s (image %s, subnet %s.0/24, host ports %s1180..%s4182)",
		opts.Project, opts.Image, opts.Subnet, opts.PortPrefix, opts.PortPrefix))

	// Cleanup, whatever happens: the project with its volumes, the image
	// this run built and its binaries.
	bg := context.Background()
	defer func() {
		if opts.Keep {
			log.Info("leaving the compose project up", "project", opts.Project)
			return
		}
		cctx, cancel := context.WithTimeout(bg, 3*time.Minute)
		defer cancel()
		if _, err := c.composeRun(cctx, "down", "-v", "--remove-orphans"); err != nil {
			log.Error("compose down", "err", err)
		}
		if buildImage {
			c.run(cctx, "docker", "rmi", opts.Image)
		}
		os.RemoveAll(filepath.Join(root, "build", opts.Project))
	}()
	if buildImage {
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		_, err := c.run(bctx, "deploy/build-image.sh", opts.Image, "jepsen")
		cancel()
		if err != nil {
			return nil, err
		}
	}
	uctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	_, err = c.composeRun(uctx, "up", "-d")
	if err == nil {
		err = c.waitHealthy(uctx)
	}
	cancel()
	if err != nil {
		return nil, err
	}
	var addrs, grpcAddrs []string
	for i := range c.services {
		addrs, grpcAddrs = append(addrs, c.port(i, "181")), append(grpcAddrs, c.port(i, "182"))
	}
	log.Info("compose cluster up", "project", opts.Project, "addrs", addrs, "dir", dir)

	hist := NewHistory()
	env := &Env{Addrs: addrs, GRPCAddrs: grpcAddrs, History: hist, Log: log, Seed: cfg.Seed, Dir: dir,
		OpTimeout: cfg.OpTimeout, SessionTimeout: cfg.SessionTimeout}
	setupCtx, cancel := context.WithTimeout(ctx, time.Minute)
	for _, w := range workloads {
		if err := w.Setup(setupCtx, env); err != nil {
			cancel()
			return nil, fmt.Errorf("jepsen: %s setup: %w", w.Name(), err)
		}
	}
	cancel()

	runCtx, stopRun := context.WithTimeout(ctx, cfg.Duration)
	defer stopRun()
	var wg sync.WaitGroup
	for _, w := range workloads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Run(runCtx, env)
		}()
	}
	var healErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		healErr = c.schedule(runCtx, hist, cfg)
	}()
	roleCtx, stopRoles := context.WithCancel(ctx)
	roleDone := make(chan struct{})
	go func() {
		defer close(roleDone)
		last := "?"
		for roleCtx.Err() == nil {
			l := ""
			lctx, cancel := context.WithTimeout(roleCtx, time.Second)
			if i := c.leader(lctx); i >= 0 {
				l = c.services[i]
			}
			cancel()
			if l != last && roleCtx.Err() == nil {
				hist.AddRole(RoleChange{At: hist.Now(), Leader: l})
				last = l
			}
			select {
			case <-roleCtx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	if healErr != nil {
		rep.Notes = append(rep.Notes, "heal: "+healErr.Error())
	}

	recoverCtx, cancel := context.WithTimeout(ctx, time.Minute)
	t0 := time.Now()
	err = c.waitHealthy(recoverCtx)
	cancel()
	if err != nil {
		rep.Notes = append(rep.Notes, "cluster did not recover: "+err.Error())
	} else {
		log.Info("cluster recovered", "after", time.Since(t0).Round(time.Millisecond))
	}
	checkCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	for _, w := range workloads {
		v := w.Check(checkCtx, env)
		log.Info("checked", "checker", v.Checker, "result", v.Result, "summary", v.Summary)
		rep.Verdicts = append(rep.Verdicts, v)
	}
	cancel()
	stopRoles()
	<-roleDone
	rep.Faults, rep.Roles = hist.Faults(), hist.Roles()
	rep.Elapsed = time.Since(started).Round(time.Millisecond).String()
	return rep, c.writeReport(rep, hist)
}

// schedule is Run's schedule with the compose nemeses: a quiet interval, a
// seeded fault, a hold, the heal; a fault is always healed.
func (c *composeCluster) schedule(ctx context.Context, hist *History, cfg Config) error {
	if len(cfg.Nemeses) == 0 {
		<-ctx.Done()
		return nil
	}
	r := rand.New(rand.NewSource(cfg.Seed))
	sleep := func(base time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(base + time.Duration(r.Int63n(int64(base)))):
			return true
		}
	}
	var errs []error
	for sleep(cfg.Interval) {
		name := cfg.Nemeses[r.Intn(len(cfg.Nemeses))]
		f := Fault{Nemesis: name, Start: hist.Now()}
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		fault, err := c.inject(fctx, name, r)
		f.Desc = fault.desc
		if err != nil {
			f.Err = err.Error()
			c.log.Warn("inject", "nemesis", name, "desc", fault.desc, "err", err)
		} else {
			c.log.Info("fault", "nemesis", name, "desc", fault.desc)
			sleep(cfg.Hold)
		}
		if fault.heal != nil {
			if err := fault.heal(fctx); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				f.Err += " heal: " + err.Error()
			}
		}
		cancel()
		f.End = hist.Now()
		hist.AddFault(f)
		c.log.Info("healed", "nemesis", name)
	}
	return errors.Join(errs...)
}

// writeReport writes what Run's report holds, with each container's log
// (docker-compose logs) in place of the processes' logs.
func (c *composeCluster) writeReport(rep *Report, hist *History) error {
	if err := writeJSON(filepath.Join(rep.Dir, "params.json"), rep.Config); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(rep.Dir, "verdicts.json"), rep); err != nil {
		return err
	}
	ops := sortedOps(hist)
	f, err := os.Create(filepath.Join(rep.Dir, "history.jsonl"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, op := range ops {
		enc.Encode(op)
	}
	if err := f.Close(); err != nil {
		return err
	}
	var logs []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range c.services {
		out, _ := c.composeRun(ctx, "logs", "--no-color", s)
		name := s + ".log"
		if err := os.WriteFile(filepath.Join(rep.Dir, name), []byte(out), 0o644); err == nil {
			logs = append(logs, name)
		}
	}
	return os.WriteFile(filepath.Join(rep.Dir, "report.html"), []byte(reportHTML(rep, ops, logs)), 0o644)
}
