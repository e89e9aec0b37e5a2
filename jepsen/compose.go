package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	opts       ComposeOptions
	cfg        Config
	compose    []string // docker-compose or docker compose, with -f and -p
	env        []string
	services   []string
	log        *slog.Logger
	buildImage bool // the run builds opts.Image (and removes it at close)
	started    bool // start began: close takes the project down
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
	return getHealth(ctx, c.port(i, "180"))
}

func (c *composeCluster) leader(ctx context.Context) int {
	return leaderOf(ctx, len(c.services), c.health)
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
	return runOn(ctx, cfg, &composeCluster{opts: opts})
}

func (c *composeCluster) configure(cfg Config) error {
	c.cfg, c.log = cfg, cfg.Log
	c.defaults()
	for _, n := range cfg.Nemeses {
		if !slices.Contains(ComposeNemesisNames, n) {
			return fmt.Errorf("jepsen: unknown compose nemesis %q (known: %v)", n, ComposeNemesisNames)
		}
	}
	composeCmd := []string{"docker-compose"}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		composeCmd = []string{"docker", "compose"}
	}
	root, err := filepath.Abs(c.opts.Root)
	if err != nil {
		return err
	}
	c.opts.Root = root
	c.buildImage = c.opts.Image == ""
	if c.buildImage {
		c.opts.Image = "coord:" + c.opts.Project
	}
	c.services = []string{"coord1", "coord2", "coord3", "coord4"}
	c.compose = append(composeCmd, "-f", filepath.Join(root, "docker-compose.yml"), "-p", c.opts.Project)
	c.env = append(os.Environ(), "COORD_IMAGE="+c.opts.Image, "COORD_SUBNET="+c.opts.Subnet,
		"COORD_PORT_PREFIX="+c.opts.PortPrefix, "BIN_DIR=build/"+c.opts.Project, "COMPOSE="+strings.Join(c.compose, " "))
	return nil
}

// defaults fills in the options left empty.
func (c *composeCluster) defaults() {
	if c.opts.Root == "" {
		c.opts.Root = "."
	}
	if c.opts.Project == "" {
		c.opts.Project = fmt.Sprintf("jepsen%d", os.Getpid())
	}
	if c.opts.Subnet == "" {
		c.opts.Subnet = fmt.Sprintf("10.214.%d", os.Getpid()%250+1)
	}
	if c.opts.PortPrefix == "" {
		c.opts.PortPrefix = "6"
	}
}

func (c *composeCluster) options() runOptions {
	return runOptions{dirTag: "-compose", faultTimeout: 30 * time.Second, recoveryNote: true}
}

// start builds the image (unless given) and brings the project up.
func (c *composeCluster) start(ctx context.Context, rep *Report) ([]fault, error) {
	rep.Notes = append(rep.Notes, fmt.Sprintf("compose project %s (image %s, subnet %s.0/24, host ports %s1180..%s4182)",
		c.opts.Project, c.opts.Image, c.opts.Subnet, c.opts.PortPrefix, c.opts.PortPrefix))
	c.started = true // from here on, close takes the project down
	if err := c.prepare(ctx); err != nil {
		return nil, err
	}
	uctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := c.composeRun(uctx, "up", "-d"); err != nil {
		return nil, err
	}
	if err := c.waitHealthy(uctx); err != nil {
		return nil, err
	}
	zk, _ := c.addrs()
	c.log.Info("compose cluster up", "project", c.opts.Project, "addrs", zk, "dir", rep.Dir)
	faults := make([]fault, len(c.cfg.Nemeses))
	for i, name := range c.cfg.Nemeses {
		faults[i] = &composeNemesis{c: c, name: name}
	}
	return faults, nil
}

// prepare builds the image (unless opts.Image is given) and makes the
// secrets docker-compose.yml mounts (deploy/keygen.sh, as deploy/up.sh
// does: deploy/secrets/, made once and kept).
func (c *composeCluster) prepare(ctx context.Context) error {
	if c.buildImage {
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		_, err := c.run(bctx, "deploy/build-image.sh", c.opts.Image, "jepsen")
		cancel()
		if err != nil {
			return err
		}
	}
	kctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := c.run(kctx, "deploy/keygen.sh")
	return err
}

func (c *composeCluster) addrs() (zk, grpc []string) {
	for i := range c.services {
		zk, grpc = append(zk, c.port(i, "181")), append(grpc, c.port(i, "182"))
	}
	return zk, grpc
}

// restarts is nil: the containers' restarts are not told to the workloads.
func (c *composeCluster) restarts() *Cluster { return nil }

func (c *composeCluster) Leader(ctx context.Context) int { return c.leader(ctx) }
func (c *composeCluster) ID(i int) string                { return c.services[i] }

// restartStopped has nothing to do: every fault's heal restarts what it
// stopped.
func (c *composeCluster) restartStopped() []error { return nil }

// halt leaves the project up, for its logs: close takes it down.
func (c *composeCluster) halt() error { return nil }

// logs writes each container's log (docker-compose logs) into dir.
func (c *composeCluster) logs(dir string) []string {
	var logs []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range c.services {
		out, _ := c.composeRun(ctx, "logs", "--no-color", s)
		name := s + ".log"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err == nil {
			logs = append(logs, name)
		}
	}
	return logs
}

// close takes the project down with its volumes and removes the image this
// run built and its binaries, unless opts.Keep.
func (c *composeCluster) close() {
	if !c.started {
		return
	}
	if c.opts.Keep {
		c.log.Info("leaving the compose project up", "project", c.opts.Project)
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.composeRun(cctx, "down", "-v", "--remove-orphans"); err != nil {
		c.log.Error("compose down", "err", err)
	}
	if c.buildImage {
		c.run(cctx, "docker", "rmi", c.opts.Image)
	}
	os.RemoveAll(filepath.Join(c.opts.Root, "build", c.opts.Project))
}

// composeNemesis is one of ComposeNemesisNames on the project: Inject
// keeps the heal of the fault it made for Heal.
type composeNemesis struct {
	c    *composeCluster
	name string
	heal func(context.Context) error
}

func (n *composeNemesis) Name() string { return n.name }

func (n *composeNemesis) Inject(ctx context.Context, r *rand.Rand) (string, error) {
	f, err := n.c.inject(ctx, n.name, r)
	n.heal = f.heal
	return f.desc, err
}

func (n *composeNemesis) Heal(ctx context.Context) error {
	heal := n.heal
	n.heal = nil
	if heal == nil {
		return nil
	}
	return heal(ctx)
}
